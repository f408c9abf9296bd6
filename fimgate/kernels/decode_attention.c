/* One query token's attention over a KV cache, grouped-query heads, fp32 (CPU).
 *
 *   q:   (kv_heads * group, d)                 the query heads, head h*group+g reads kv head h
 *   k,v: kv head h, row l at k[h * head_stride + l * d]   rows [0, n) of the view handed in
 *   out: (kv_heads * group, d)                 softmax(q k^T * scale) v
 *
 * Built and loaded by fimgate/kernels/decode_attention.py. The n rows are split into one chunk per
 * thread (flash-decoding): a thread reads each K and V row of its chunk once for all the
 * query heads of its group, keeps its own running max, sum and weighted V, and the calling
 * thread merges the partials. exp is a polynomial (relative error ~2e-7) so the loops vectorize
 * without -ffast-math (which would change the process's float environment). */
#include <stdint.h>
#include <string.h>
#include <omp.h>

static inline float exp_poly(float x) {
    /* e^x = 2^n * e^r, n = round(x / ln 2), |r| <= ln2 / 2; x <= 0 here */
    if (x < -87.0f) x = -87.0f;
    float n = __builtin_floorf(x * 1.44269504f + 0.5f);
    float r = x - n * 0.693359375f - n * -2.12194440e-4f;  /* Cody-Waite: ln 2 in two parts */
    float p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r
                + 1.6666665459e-1f) * r + 5.0000001201e-1f) * (r * r) + r + 1.0f;  /* Cephes expf */
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, 4);
    return p * two_n;
}

void decode_attention(const float *q, const float *k, const float *v, float *out, float *ws,
                      int64_t kv_heads, int64_t group, int64_t d, int64_t n, int64_t head_stride,
                      float scale, int threads) {
    int64_t heads = kv_heads * group;
    if (threads < 1) threads = 1;
    if (n < 64 * threads) threads = 1;
    float *scores = ws;                      /* heads * n */
    float *part = ws + heads * n;            /* threads * heads * (d + 2): max, sum, acc[d] */
    int used = 1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        if (t == 0) used = nt;
        int64_t l0 = n * t / nt, l1 = n * (t + 1) / nt;
        for (int64_t h = 0; h < kv_heads; h++) {
            const float *kh = k + h * head_stride, *vh = v + h * head_stride;
            const float *qg = q + h * group * d;
            float *sg = scores + h * group * n;
            for (int64_t l = l0; l < l1; l++) {  /* each K row once, for all the group's heads */
                const float *kr = kh + l * d;
                for (int64_t g = 0; g < group; g++) {
                    const float *qv = qg + g * d;
                    float dot = 0.0f;
#pragma omp simd reduction(+:dot)
                    for (int64_t j = 0; j < d; j++) dot += qv[j] * kr[j];
                    sg[g * n + l] = dot * scale;
                }
            }
            for (int64_t g = 0; g < group; g++) {
                float *s = sg + g * n;
                float m = -3.0e38f;
                for (int64_t l = l0; l < l1; l++) m = s[l] > m ? s[l] : m;
                float sum = 0.0f;
#pragma omp simd reduction(+:sum)
                for (int64_t l = l0; l < l1; l++) {
                    float e = exp_poly(s[l] - m);
                    s[l] = e;
                    sum += e;
                }
                float *pp = part + ((int64_t)t * heads + h * group + g) * (d + 2);
                pp[0] = m;
                pp[1] = sum;
                for (int64_t j = 0; j < d; j++) pp[2 + j] = 0.0f;
            }
            for (int64_t l = l0; l < l1; l++) {  /* each V row once, for all the group's heads */
                const float *vr = vh + l * d;
                for (int64_t g = 0; g < group; g++) {
                    float *acc = part + ((int64_t)t * heads + h * group + g) * (d + 2) + 2;
                    float p = sg[g * n + l];
#pragma omp simd
                    for (int64_t j = 0; j < d; j++) acc[j] += p * vr[j];
                }
            }
        }
    }
    for (int64_t qh = 0; qh < heads; qh++) {
        float m = -3.0e38f;
        for (int t = 0; t < used; t++) {
            float mt = part[((int64_t)t * heads + qh) * (d + 2)];
            m = mt > m ? mt : m;
        }
        float total = 0.0f;
        float *o = out + qh * d;
        for (int64_t j = 0; j < d; j++) o[j] = 0.0f;
        for (int t = 0; t < used; t++) {
            const float *pp = part + ((int64_t)t * heads + qh) * (d + 2);
            float w = exp_poly(pp[0] - m);
            total += w * pp[1];
            for (int64_t j = 0; j < d; j++) o[j] += w * pp[2 + j];
        }
        float inv = 1.0f / total;
        for (int64_t j = 0; j < d; j++) o[j] *= inv;
    }
}

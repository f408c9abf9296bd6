/* One query token's attention over a KV cache, grouped-query heads, fp32 (CPU).
 *
 *   q:   (kv_heads * group, d)                 the query heads, head h*group+g reads kv head h
 *   k,v: kv head h, row l at k[h * head_stride + l * d]   rows [0, n) of the view handed in
 *   out: (kv_heads * group, d)                 softmax(q k^T * scale) v
 *
 * Built and loaded by fimgate/kernels/decode_attention.py. The n rows are split into chunks of
 * CHUNK rows (flash-decoding): each chunk's K and V rows are read once for all the query heads of
 * their group, into the chunk's own max, sum and weighted V, and the calling thread merges the
 * partials in chunk order. Threads take runs of whole chunks, so the bits of the result depend on n
 * alone, never on how many threads ran: the server picks the thread count per request by what the
 * machine has free (backend/embedded/threads.py), and a token must come out the same either way. exp is a polynomial (relative error ~2e-7) so the loops vectorize
 * without -ffast-math (which would change the process's float environment).
 *
 * With AVX-512 and d = 64 or 128 (Qwen2.5, SmolLM2, Llama) the two loops over rows run in blocks
 * (scores16, weigh_rows): q.k for 16 rows at once, their 16 sums collapsed into one vector by a
 * transposing tree of shuffles (three ops a dot instead of a full horizontal sum each), and the
 * weighted V rows summed into accumulators held in registers. At 1,000 cached tokens this took one
 * layer's attention (Qwen2.5-0.5B: 14 heads over 2 of K/V, d 64, two threads) from ~160 to ~50 us here;
 * other shapes take the plain loops. */
#include <stdint.h>
#include <string.h>
#include <omp.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define CHUNK 128 /* rows per partial (a multiple of 16, the blocked loops' step) */

/* Floats of work space decode_attention needs over n rows: the scores, then each chunk's partials. */
int64_t decode_attention_workspace(int64_t heads, int64_t d, int64_t n) {
    return heads * n + (n + CHUNK - 1) / CHUNK * heads * (d + 2);
}

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

/* s[l0..l1) -> exp(s - m), with m their max and sum the sum of the exponentials */
static void softmax_run(float *s, int64_t l0, int64_t l1, float *m_out, float *sum_out) {
    float m = -3.0e38f, sum = 0.0f;
    int64_t l = l0;
#ifdef __AVX512F__
    __m512 vm = _mm512_set1_ps(m);
    for (; l + 16 <= l1; l += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(s + l));
    m = _mm512_reduce_max_ps(vm);
#endif
    for (; l < l1; l++) m = s[l] > m ? s[l] : m;
    l = l0;
#ifdef __AVX512F__
    /* exp_poly, 16 at a time */
    const __m512 lo = _mm512_set1_ps(-87.0f), log2e = _mm512_set1_ps(1.44269504f), half = _mm512_set1_ps(0.5f);
    __m512 vsum = _mm512_setzero_ps(), vmax = _mm512_set1_ps(m);
    for (; l + 16 <= l1; l += 16) {
        __m512 x = _mm512_max_ps(_mm512_sub_ps(_mm512_loadu_ps(s + l), vmax), lo);
        __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, log2e, half), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
        __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
        p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
        __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
        __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
        _mm512_storeu_ps(s + l, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    sum = _mm512_reduce_add_ps(vsum);
#endif
    for (; l < l1; l++) {
        float e = exp_poly(s[l] - m);
        s[l] = e;
        sum += e;
    }
    *m_out = m;
    *sum_out = sum;
}

#ifdef __AVX512F__
/* lane r of the result = the sum of the 16 lanes of a[r] */
static inline __m512 sum16x16(const __m512 a[16]) {
    __m512 b[8], c[4];
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
        c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    __m512 e0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
    __m512 e1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(e0, e1, 0x88), _mm512_shuffle_f32x4(e0, e1, 0xdd));
}

/* s[g * n + l] = scale * q_g . k_l for l in [l0, l0 + 16), each query head g < group; D = d / 16 */
static inline __attribute__((always_inline)) void scores16(const float *qg, const float *kh, float *sg, int64_t n,
                                                            int64_t group, int64_t l0, float scale, const int D) {
    for (int64_t g = 0; g < group; g++) {
        __m512 qv[8], a[16];
        for (int c = 0; c < D; c++) qv[c] = _mm512_loadu_ps(qg + g * 16 * D + 16 * c);
        for (int r = 0; r < 16; r++) {
            const float *kr = kh + (l0 + r) * 16 * D;
            a[r] = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kr));
            for (int c = 1; c < D; c++) a[r] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kr + 16 * c), a[r]);
        }
        _mm512_storeu_ps(sg + g * n + l0, _mm512_mul_ps(sum16x16(a), _mm512_set1_ps(scale)));
    }
}

/* acc[g] += sum over rows l in [l0, l1) of p[g * n + l] * v_l, for heads g in [g0, g0 + G): the
 * G x D accumulators stay in registers for the whole run of rows */
static inline __attribute__((always_inline)) void weigh_rows(const float *p, const float *vh, float *acc_base,
                                                              int64_t acc_stride, int64_t n, int64_t g0, int64_t l0,
                                                              int64_t l1, const int G, const int D) {
    __m512 acc[4][8];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < D; c++) acc[g][c] = _mm512_setzero_ps();
    for (int64_t l = l0; l < l1; l++) {
        const float *vr = vh + l * 16 * D;
        __m512 v[8];
        for (int c = 0; c < D; c++) v[c] = _mm512_loadu_ps(vr + 16 * c);
        for (int g = 0; g < G; g++) {
            __m512 w = _mm512_set1_ps(p[(g0 + g) * n + l]);
            for (int c = 0; c < D; c++) acc[g][c] = _mm512_fmadd_ps(w, v[c], acc[g][c]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < D; c++) {
            float *a = acc_base + (g0 + g) * acc_stride + 16 * c;
            _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), acc[g][c]));
        }
}

/* The blocked loops for one kv head, rows [l0, l1); D = d / 16 (4 or 8). Scores of rows past the
 * last whole block of 16 are left to the caller's plain loop. Returns the first row not scored. */
static inline __attribute__((always_inline)) int64_t score_blocks(const float *qg, const float *kh, float *sg, int64_t n,
                                                                   int64_t group, int64_t l0, int64_t l1, float scale,
                                                                   const int D) {
    int64_t l = l0;
    for (; l + 16 <= l1; l += 16) scores16(qg, kh, sg, n, group, l, scale, D);
    return l;
}

static inline __attribute__((always_inline)) void weigh_blocks(const float *sg, const float *vh, float *acc_base,
                                                                int64_t acc_stride, int64_t n, int64_t group, int64_t l0,
                                                                int64_t l1, const int D) {
    const int G = D == 4 ? 4 : 2;  /* G x D accumulators: 16 registers */
    int64_t g = 0;
    for (; g + G <= group; g += G) weigh_rows(sg, vh, acc_base, acc_stride, n, g, l0, l1, G, D);
    for (; g < group; g++) weigh_rows(sg, vh, acc_base, acc_stride, n, g, l0, l1, 1, D);
}
#endif

void decode_attention(const float *q, const float *k, const float *v, float *out, float *ws,
                      int64_t kv_heads, int64_t group, int64_t d, int64_t n, int64_t head_stride,
                      float scale, int threads) {
    int64_t heads = kv_heads * group, chunks = (n + CHUNK - 1) / CHUNK;
    if (threads < 1 || n < 64 * threads) threads = 1;
    if (threads > chunks) threads = (int)chunks;
    float *scores = ws;                      /* heads * n */
    float *part = ws + heads * n;            /* chunks * heads * (d + 2): max, sum, acc[d] */
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        for (int64_t c = chunks * t / nt; c < chunks * (t + 1) / nt; c++) {
            int64_t l0 = c * CHUNK, l1 = l0 + CHUNK < n ? l0 + CHUNK : n;
            for (int64_t h = 0; h < kv_heads; h++) {
                const float *kh = k + h * head_stride, *vh = v + h * head_stride;
                const float *qg = q + h * group * d;
                float *sg = scores + h * group * n;
                int64_t from = l0;
#ifdef __AVX512F__
                if (d == 64) from = score_blocks(qg, kh, sg, n, group, l0, l1, scale, 4);
                if (d == 128) from = score_blocks(qg, kh, sg, n, group, l0, l1, scale, 8);
#endif
                for (int64_t l = from; l < l1; l++) {  /* each K row once, for all the group's heads */
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
                    float m, sum;
                    softmax_run(s, l0, l1, &m, &sum);
                    float *pp = part + (c * heads + h * group + g) * (d + 2);
                    pp[0] = m;
                    pp[1] = sum;
                    for (int64_t j = 0; j < d; j++) pp[2 + j] = 0.0f;
                }
                float *acc_base = part + (c * heads + h * group) * (d + 2) + 2;
                from = l0;
#ifdef __AVX512F__
                if (d == 64) weigh_blocks(sg, vh, acc_base, d + 2, n, group, l0, l1, 4), from = l1;
                if (d == 128) weigh_blocks(sg, vh, acc_base, d + 2, n, group, l0, l1, 8), from = l1;
#endif
                for (int64_t l = from; l < l1; l++) {  /* each V row once, for all the group's heads */
                    const float *vr = vh + l * d;
                    for (int64_t g = 0; g < group; g++) {
                        float *acc = acc_base + g * (d + 2);
                        float p = sg[g * n + l];
#pragma omp simd
                        for (int64_t j = 0; j < d; j++) acc[j] += p * vr[j];
                    }
                }
            }
        }
    }
    for (int64_t qh = 0; qh < heads; qh++) {
        float m = -3.0e38f;
        for (int64_t c = 0; c < chunks; c++) {
            float mc = part[(c * heads + qh) * (d + 2)];
            m = mc > m ? mc : m;
        }
        float total = 0.0f;
        float *o = out + qh * d;
        for (int64_t j = 0; j < d; j++) o[j] = 0.0f;
        for (int64_t c = 0; c < chunks; c++) {
            const float *pp = part + (c * heads + qh) * (d + 2);
            float w = exp_poly(pp[0] - m);
            total += w * pp[1];
            for (int64_t j = 0; j < d; j++) o[j] += w * pp[2 + j];
        }
        float inv = 1.0f / total;
        for (int64_t j = 0; j < d; j++) o[j] *= inv;
    }
}

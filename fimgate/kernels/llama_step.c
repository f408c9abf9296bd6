/* One token through every layer of a Llama-style decoder in a single call (CPU, fp32 activations).
 *
 *   x (hidden)  ->  for each layer:  h = rms_norm(x) * attn_norm
 *                                    q, k, v = qkv h;  rope(q, k);  K/V cache row `slot` = k, v
 *                                    x += o attention(q, K/V rows [0, slot])
 *                                    h = rms_norm(x) * mlp_norm
 *                                    g, u = gate_up h;  x += down (silu(g) * u)
 *
 * What fimgate/backend/model/llama.py does for one token with ~15 torch calls a layer (~450 a step, ~5 ms of
 * a ~25 ms step spent outside the matrix products here) is one ctypes call. The products are
 * int8_gemv.c's kernel (int8 weights, per-row scales) or an fp32 one below; attention is
 * decode_attention.c's; both are included so this file builds alone. The norms, RoPE, SiLU and
 * residual adds are plain loops over a few thousand floats. No biases, q/k norms, sandwich
 * norms or sliding windows: models with those take the torch path (fimgate/backend/model/fused_step.py
 * decides).
 *
 * K and V caches: (layers, kv_heads, capacity, d) fp32, contiguous; layer_stride = kv_heads *
 * capacity * d, head_stride = capacity * d. rope_cos / rope_sin: the position's per-dimension
 * tables (fimgate/kernels/rope.py rope_tables): out = x * cos + swapped(x) * sin, where swapped pairs
 * dimension j with j + d/2 (neox) or with its neighbour (gptj). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "int8_gemv.c"
#include "decode_attention.c"

typedef struct {
    const void *w;        /* (rows, cols) int8 or fp32 */
    const float *scale;   /* (rows,) fp32 per-row scales, int8 only */
    int64_t rows, cols;
    int64_t int8;
} Linear;

typedef struct {
    const float *attn_norm, *mlp_norm;
    Linear qkv, o, gate_up, down;
} Layer;

/* y = W x for fp32 W: eight rows a pass, each x chunk loaded once for all eight. */
static void f32_gemv(const float *w, const float *x, float *y, int64_t n, int64_t k, int threads) {
    int64_t blocks = (n + ROWS - 1) / ROWS;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t r0 = b * ROWS;
        int64_t rn = n - r0 < ROWS ? n - r0 : ROWS;
        for (int64_t r = 0; r < rn; r++) {
            const float *wr = w + (r0 + r) * k;
            float s = 0.0f;
#pragma omp simd reduction(+:s)
            for (int64_t j = 0; j < k; j++) s += wr[j] * x[j];
            y[r0 + r] = s;
        }
    }
}

static void apply(const Linear *l, const float *x, float *y, int threads) {
    if (l->int8)
        int8_gemv((const int8_t *)l->w, l->scale, x, y, l->rows, l->cols, 1, threads);
    else
        f32_gemv((const float *)l->w, x, y, l->rows, l->cols, threads);
}

static void rms_norm(const float *x, const float *w, float *out, int64_t n, float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+:ss)
    for (int64_t j = 0; j < n; j++) ss += x[j] * x[j];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
#pragma omp simd
    for (int64_t j = 0; j < n; j++) out[j] = x[j] * inv * w[j];
}

static void rope(float *x, const float *c, const float *s, int64_t d, int gptj) {
    float swapped[512];
    int64_t half = d / 2;
    for (int64_t j = 0; j < d; j++)
        swapped[j] = gptj ? x[j ^ 1] : x[j < half ? j + half : j - half];
    for (int64_t j = 0; j < d; j++) x[j] = x[j] * c[j] + swapped[j] * s[j];
}

/* ws: workspace of llama_step_workspace(...) floats. Returns 0, or -1 if head_dim > 512. */
int llama_step(const Layer *layers, int64_t n_layers, float *x, float *k_cache, float *v_cache,
               int64_t layer_stride, int64_t head_stride, int64_t slot, const float *rope_cos,
               const float *rope_sin, int64_t gptj, int64_t hidden, int64_t heads, int64_t kv_heads,
               int64_t d, int64_t inter, float eps, float scale, float *ws, int threads) {
    if (d > 512) return -1;
    int64_t qkv_n = (heads + 2 * kv_heads) * d;
    float *h = ws, *qkv = h + hidden, *att = qkv + qkv_n, *gu = att + heads * d, *act = gu + 2 * inter,
          *out = act + inter, *attn_ws = out + hidden;
    for (int64_t i = 0; i < n_layers; i++) {
        const Layer *L = layers + i;
        rms_norm(x, L->attn_norm, h, hidden, eps);
        apply(&L->qkv, h, qkv, threads);
        for (int64_t hd = 0; hd < heads + kv_heads; hd++) rope(qkv + hd * d, rope_cos, rope_sin, d, gptj);
        float *kc = k_cache + i * layer_stride, *vc = v_cache + i * layer_stride;
        for (int64_t hd = 0; hd < kv_heads; hd++) {
            memcpy(kc + hd * head_stride + slot * d, qkv + (heads + hd) * d, d * sizeof(float));
            memcpy(vc + hd * head_stride + slot * d, qkv + (heads + kv_heads + hd) * d, d * sizeof(float));
        }
        decode_attention(qkv, kc, vc, att, attn_ws, kv_heads, heads / kv_heads, d, slot + 1, head_stride, scale,
                         threads);
        apply(&L->o, att, out, threads);
        for (int64_t j = 0; j < hidden; j++) x[j] += out[j];
        rms_norm(x, L->mlp_norm, h, hidden, eps);
        apply(&L->gate_up, h, gu, threads);
        for (int64_t j = 0; j < inter; j++) {
            float g = gu[j];
            act[j] = g / (1.0f + expf(-g)) * gu[inter + j];
        }
        apply(&L->down, act, out, threads);
        for (int64_t j = 0; j < hidden; j++) x[j] += out[j];
    }
    return 0;
}

int64_t llama_step_workspace(int64_t hidden, int64_t heads, int64_t kv_heads, int64_t d, int64_t inter,
                             int64_t kv_len, int threads) {
    return hidden + (heads + 2 * kv_heads) * d + heads * d + 3 * inter + hidden
           + heads * kv_len + (int64_t)(threads < 1 ? 1 : threads) * heads * (d + 2);
}

/* One token (of each sequence in a batch) through every layer of a Llama-style decoder in a single
 * call (CPU, fp32 activations).
 *
 *   x (hidden)  ->  for each layer:  h = rms_norm(x) * attn_norm
 *                                    q, k, v = qkv h;  rope(q, k);  K/V cache row `slot` = k, v
 *                                    x += o attention(q, K/V rows [0, slot])
 *                                    h = rms_norm(x) * mlp_norm
 *                                    g, u = gate_up h;  x += down (silu(g) * u)
 *
 * What fimgate/backend/model/llama.py does for one token with ~15 torch calls a layer (~450 a step, ~5 ms of
 * a ~25 ms step spent outside the matrix products here) is one ctypes call. The products are
 * int8_gemv.c's kernel (int8 weights with per-row scales, bf16 or fp32: the same tiles) or
 * quant_gemv.c's (GGUF's quantized blocks as the file stores them, the activations quantized
 * per 32 values once per linear); attention is decode_attention.c's; all are included so this
 * file builds alone. The norms, RoPE, SiLU, the q/k/v biases (Qwen2) and residual adds are plain
 * loops over a few thousand floats. No q/k norms, sandwich norms or sliding windows: models with
 * those take the torch path (fimgate/backend/model/fused_step.py decides).
 *
 * K and V caches: (layers, kv_heads, capacity, d) fp32, contiguous; head_stride = capacity * d,
 * a layer is kv_heads head strides. rope_cos / rope_sin: the position's per-dimension
 * tables (fimgate/kernels/rope.py rope_tables): out = x * cos + swapped(x) * sin, where swapped pairs
 * dimension j with j + d/2 (neox) or with its neighbour (gptj). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "int8_gemv.c"
#include "decode_attention.c"
#include "quant_gemv.c"

#define QUANT 3           /* Linear.kind: parts are QMatrix (quant_gemv.c) */

typedef struct {
    const void *w;        /* (rows, cols) fp32, int8 or bf16; QUANT: n_parts QMatrix side by side */
    const float *scale;   /* (rows,) fp32 per-row scales, int8 only */
    int64_t rows, cols;
    int64_t kind;         /* FP32, INT8 or BF16 (int8_gemv.c), or QUANT */
    int64_t n_parts;      /* QUANT only */
    const float *bias;    /* (rows,) added to the product, or NULL */
} Linear;

typedef struct {
    const float *attn_norm, *mlp_norm;
    Linear qkv, o, gate_up, down;
} Layer;

/* y = x W^T (+ bias) for m rows of x; qws: room for x quantized (quant_workspace bytes). */
static void apply(const Linear *l, const float *x, float *y, int64_t m, void *qws, int threads) {
    if (l->kind == QUANT)
        quant_gemv((const QMatrix *)l->w, (int)l->n_parts, x, y, m, qws, threads, 0, NULL);
    else if (l->kind == INT8)
        int8_gemv((const int8_t *)l->w, l->scale, x, y, l->rows, l->cols, m, threads);
    else if (l->kind == BF16)
        bf16_gemv((const uint16_t *)l->w, x, y, l->rows, l->cols, m, threads);
    else
        gemv(l->w, FP32, NULL, x, y, l->rows, l->cols, m, threads);
    if (l->bias)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < l->rows; j++) y[i * l->rows + j] += l->bias[j];
}

/* Floats of room for a linear's input quantized (quant_gemv.c), whichever input is widest. */
static int64_t quant_floats(int64_t batch, int64_t hidden, int64_t attn, int64_t inter) {
    int64_t cols = hidden > attn ? hidden : attn;
    cols = cols > inter ? cols : inter;
    return (quant_workspace(batch, cols) + 3) / 4 + 16;
}

/* x * sigmoid(x), the exponential only ever of a non-positive number (decode_attention.c's
 * polynomial: relative error ~2e-7, vectorizes where expf would not). */
static inline float silu(float x) {
    float e = exp_poly(x < 0 ? x : -x);
    return x < 0 ? x * e / (1.0f + e) : x / (1.0f + e);
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

/* One token for each of `batch` sequences, each with its own cache, slot and position: the
 * linears run once for the whole batch (each weight read once, not once per sequence), the
 * attention per sequence. Row b's arithmetic is the same as when it runs alone, so a batched
 * token equals the token alone bit for bit.
 *   x: (batch, hidden), replaced by the last layer's output
 *   k_caches[b], v_caches[b]: sequence b's caches; head_strides[b] = its capacity * d
 *   slots[b]: the row written and attended up to; rope_cos / rope_sin: (batch, d)
 * ws: workspace of llama_step_workspace(...) floats.
 * stop: NULL, or a flag another thread may set while the step runs: it is read before each layer,
 *   and once set the step returns 1 at once (x and the rows written so far are then garbage: the
 *   caller drops the step - a superseded keystroke's step need not finish before the next one's).
 * Returns 0, 1 if stopped, or -1 if head_dim > 512. */
int llama_step(const Layer *layers, int64_t n_layers, int64_t batch, float *x, float *const *k_caches,
               float *const *v_caches, const int64_t *head_strides, const int64_t *slots, const float *rope_cos,
               const float *rope_sin, int64_t gptj, int64_t hidden, int64_t heads, int64_t kv_heads,
               int64_t d, int64_t inter, float eps, float scale, float *ws, int threads, const volatile int32_t *stop) {
    if (d > 512) return -1;
    int64_t qkv_n = (heads + 2 * kv_heads) * d;
    float *h = ws, *qkv = h + batch * hidden, *att = qkv + batch * qkv_n, *gu = att + batch * heads * d,
          *act = gu + batch * 2 * inter, *out = act + batch * inter, *qws = out + batch * hidden,
          *attn_ws = qws + quant_floats(batch, hidden, heads * d, inter);
    for (int64_t i = 0; i < n_layers; i++) {
        if (stop && *stop) return 1;
        const Layer *L = layers + i;
        for (int64_t b = 0; b < batch; b++) rms_norm(x + b * hidden, L->attn_norm, h + b * hidden, hidden, eps);
        apply(&L->qkv, h, qkv, batch, qws, threads);
        for (int64_t b = 0; b < batch; b++) {
            float *qb = qkv + b * qkv_n;
            for (int64_t hd = 0; hd < heads + kv_heads; hd++)
                rope(qb + hd * d, rope_cos + b * d, rope_sin + b * d, d, gptj);
            int64_t hs = head_strides[b], slot = slots[b];
            float *kc = k_caches[b] + i * kv_heads * hs, *vc = v_caches[b] + i * kv_heads * hs;
            for (int64_t hd = 0; hd < kv_heads; hd++) {
                memcpy(kc + hd * hs + slot * d, qb + (heads + hd) * d, d * sizeof(float));
                memcpy(vc + hd * hs + slot * d, qb + (heads + kv_heads + hd) * d, d * sizeof(float));
            }
            decode_attention(qb, kc, vc, att + b * heads * d, attn_ws, kv_heads, heads / kv_heads, d, slot + 1, hs,
                             scale, threads);
        }
        apply(&L->o, att, out, batch, qws, threads);
        for (int64_t j = 0; j < batch * hidden; j++) x[j] += out[j];
        for (int64_t b = 0; b < batch; b++) rms_norm(x + b * hidden, L->mlp_norm, h + b * hidden, hidden, eps);
        apply(&L->gate_up, h, gu, batch, qws, threads);
        for (int64_t b = 0; b < batch; b++) {
            const float *g = gu + b * 2 * inter;
            float *a = act + b * inter;
#pragma omp simd
            for (int64_t j = 0; j < inter; j++) a[j] = silu(g[j]) * g[inter + j];
        }
        apply(&L->down, act, out, batch, qws, threads);
        for (int64_t j = 0; j < batch * hidden; j++) x[j] += out[j];
    }
    return 0;
}

/* kv_len: the longest cache any sequence of the batch attends over. */
int64_t llama_step_workspace(int64_t batch, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t d, int64_t inter,
                             int64_t kv_len) {
    return batch * (hidden + (heads + 2 * kv_heads) * d + heads * d + 3 * inter + hidden)
           + quant_floats(batch, hidden, heads * d, inter) + decode_attention_workspace(heads, d, kv_len);
}

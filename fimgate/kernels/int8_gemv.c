/* y = x @ (w * scale)^T for a few rows of x: int8 weights, fp32 activations, fp32 accumulation;
 * the same products for fp32 or bf16 weights (bf16_gemv; llama_step.c's linears).
 *
 *   w: (n, k) int8, row-major      scale: (n,) fp32, one per output row
 *   x: (m, k) fp32, m small         y: (m, n) fp32
 *
 * Built and loaded by fimgate/kernels/int8_gemv.py. Rows are split across OpenMP threads; the process
 * already has torch's libgomp loaded, so this shares torch's thread pool rather than starting a
 * second one. Each thread takes eight weight rows at a time and streams them once, in tiles of four
 * rows by up to four rows of x: 16 int8 weights converted to fp32 per instruction, once for the
 * tile's rows of x (AVX-512); the activations stay in L1. Without AVX-512, plain loops. */
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define ROWS 8

/* What a weight matrix holds: fp32, int8 with a per-row fp32 scale, or bf16 (the top half of an
 * fp32, widened exactly: the product is the fp32 one of the bf16-rounded weights). */
enum { FP32 = 0, INT8 = 1, BF16 = 2 };

static inline float weight(const void *w, const int KIND, int64_t i) {
    if (KIND == INT8) return (float)((const int8_t *)w)[i];
    if (KIND == BF16) {
        uint32_t u = (uint32_t)((const uint16_t *)w)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return ((const float *)w)[i];
}

/* y row a, entries b: w row b . x row a, for RR weight rows and II rows of x (both <= 4); weights
 * int8 (then times the row's scale), bf16 or fp32, as KIND says. Each pair is an independent
 * 16-lane accumulation over j, reduced, then the tail: the same number for a pair whatever else
 * shares its tile, so a batched row equals the row alone. A tile reads each weight vector once
 * (16 int8 weights converted to fp32 once) for its II rows of x, each x vector once for its RR
 * weight rows. KIND, RR and II are constants wherever this is inlined. */
static inline __attribute__((always_inline)) void tile(const void *wp, const int KIND, const float *scale,
                                                        const float *x, int64_t k, float *y, int64_t n, const int RR,
                                                        const int II) {
    const int8_t *wq = (const int8_t *)wp;
    const float *wf = (const float *)wp;
    const uint16_t *wb = (const uint16_t *)wp;
    int64_t j = 0;
    float sums[4][4];
#ifdef __AVX512F__
    __m512 acc[4][4];
    for (int b = 0; b < RR; b++)
        for (int a = 0; a < II; a++) acc[b][a] = _mm512_setzero_ps();
    for (; j + 16 <= k; j += 16) {
        __m512 xv[4];
        for (int a = 0; a < II; a++) xv[a] = _mm512_loadu_ps(x + a * k + j);
        for (int b = 0; b < RR; b++) {
            __m512 wv = KIND == INT8 ? _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wq + b * k + j))))
                        : KIND == BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(
                                             _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(wb + b * k + j))), 16))
                                       : _mm512_loadu_ps(wf + b * k + j);
            for (int a = 0; a < II; a++) acc[b][a] = _mm512_fmadd_ps(wv, xv[a], acc[b][a]);
        }
    }
    for (int b = 0; b < RR; b++)
        for (int a = 0; a < II; a++) sums[b][a] = _mm512_reduce_add_ps(acc[b][a]);
#else
    for (int b = 0; b < RR; b++)
        for (int a = 0; a < II; a++) sums[b][a] = 0.0f;
#endif
    for (int b = 0; b < RR; b++)
        for (int a = 0; a < II; a++) {
            float s = sums[b][a];
            for (int64_t jj = j; jj < k; jj++) s += weight(wp, KIND, b * k + jj) * x[a * k + jj];
            y[a * n + b] = KIND == INT8 ? s * scale[b] : s;
        }
}

#define TILE(RR, II) tile(w, KIND, scale, x, k, y, n, RR, II)
static inline __attribute__((always_inline)) void tile_any(const void *w, const int KIND, const float *scale,
                                                            const float *x, int64_t k, float *y, int64_t n, int64_t rr,
                                                            int64_t ii) {
    switch (rr * 8 + ii) {
    case 33: TILE(4, 1); break; case 34: TILE(4, 2); break; case 35: TILE(4, 3); break; case 36: TILE(4, 4); break;
    case 25: TILE(3, 1); break; case 26: TILE(3, 2); break; case 27: TILE(3, 3); break; case 28: TILE(3, 4); break;
    case 17: TILE(2, 1); break; case 18: TILE(2, 2); break; case 19: TILE(2, 3); break; case 20: TILE(2, 4); break;
    case 9: TILE(1, 1); break;  case 10: TILE(1, 2); break; case 11: TILE(1, 3); break; case 12: TILE(1, 4); break;
    }
}
#undef TILE

/* y = x W^T for W (n, k), int8 with per-row scales or fp32, and m rows of x (m, k): y (m, n).
 * Threads split the weight rows, ROWS at a time; each block is read once for all m rows of x. */
static inline __attribute__((always_inline)) void gemv(const void *w, const int KIND, const float *scale,
                                                        const float *x, float *y, int64_t n, int64_t k, int64_t m,
                                                        int threads) {
    int64_t blocks = (n + ROWS - 1) / ROWS;
    int64_t bytes = KIND == INT8 ? 1 : KIND == BF16 ? 2 : (int64_t)sizeof(float);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t r0 = blk * ROWS;
        int64_t rn = n - r0 < ROWS ? n - r0 : ROWS;
        for (int64_t i = 0; i < m; i += 4)
            for (int64_t r = 0; r < rn; r += 4)
                tile_any((const char *)w + (r0 + r) * k * bytes, KIND, KIND == INT8 ? scale + r0 + r : scale, x + i * k, k,
                         y + i * n + r0 + r, n, rn - r < 4 ? rn - r : 4, m - i < 4 ? m - i : 4);
    }
}

void int8_gemv(const int8_t *w, const float *scale, const float *x, float *y,
               int64_t n, int64_t k, int64_t m, int threads) {
    gemv(w, INT8, scale, x, y, n, k, m, threads);
}

/* The same for bf16 weights (n, k), as uint16 bit patterns: y = x W^T in fp32. */
void bf16_gemv(const uint16_t *w, const float *x, float *y, int64_t n, int64_t k, int64_t m, int threads) {
    gemv(w, BF16, NULL, x, y, n, k, m, threads);
}

int has_avx512(void) {
#ifdef __AVX512F__
    return 1;
#else
    return 0;
#endif
}

/* The screen of fimgate/backend/model/screened_head.py in one call: y = the int8 product for one x (m = 1),
 * bound_r = per_l1[r] * l1 + rel * |y_r|, and the rows that can still be the argmax - those
 * whose upper bound y + bound reaches the best lower bound max(y - bound) - written to `rows`.
 * Returns how many. */
static int64_t screen_rows(const float *y, const float *per_l1, int64_t *rows, int64_t n, float l1, float rel) {
    float floor = -3.0e38f;
    for (int64_t r = 0; r < n; r++) {
        float b = per_l1[r] * l1 + rel * (y[r] < 0 ? -y[r] : y[r]);
        float lo = y[r] - b;
        floor = lo > floor ? lo : floor;
    }
    int64_t count = 0;
    for (int64_t r = 0; r < n; r++) {
        float b = per_l1[r] * l1 + rel * (y[r] < 0 ? -y[r] : y[r]);
        if (y[r] + b >= floor) rows[count++] = r;
    }
    return count;
}

int64_t int8_screen(const int8_t *w, const float *scale, const float *per_l1, const float *x, float *y,
                    int64_t *rows, int64_t n, int64_t k, float l1, float rel, int threads) {
    int8_gemv(w, scale, x, y, n, k, 1, threads);
    return screen_rows(y, per_l1, rows, n, l1, rel);
}

/* The screen for m rows of x at once (a batched step's greedy heads): the head is read once for
 * all of them; row i's y, rows and count (y + i n, rows + i n, counts[i]) are what int8_screen
 * gives for x row i alone. */
void int8_screen_batch(const int8_t *w, const float *scale, const float *per_l1, const float *x, float *y,
                       int64_t *rows, int64_t *counts, int64_t n, int64_t k, int64_t m, const float *l1, float rel,
                       int threads) {
    int8_gemv(w, scale, x, y, n, k, m, threads);
    for (int64_t i = 0; i < m; i++) counts[i] = screen_rows(y + i * n, per_l1, rows + i * n, n, l1[i], rel);
}

/* y = x @ (w * scale)^T for a few rows of x: int8 weights, fp32 activations, fp32 accumulation.
 *
 *   w: (n, k) int8, row-major      scale: (n,) fp32, one per output row
 *   x: (m, k) fp32, m small         y: (m, n) fp32
 *
 * Built and loaded by fimgate/kernels/int8_gemv.py. Rows are split across OpenMP threads; the process
 * already has torch's libgomp loaded, so this shares torch's thread pool rather than starting a
 * second one. Each thread takes eight weight rows at a time and streams them once, converting 16
 * int8 weights to fp32 per instruction and multiplying them into 16 activations (AVX-512); the
 * activations stay in L1. Without AVX-512, plain loops. */
#include <stdint.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define ROWS 8

static void rows_dot(const int8_t *w, const float *x, int64_t k, int64_t rn, float *out) {
    int64_t j = 0;
    float acc_s[ROWS] = {0};
#ifdef __AVX512F__
    __m512 acc[ROWS];
    for (int r = 0; r < ROWS; r++) acc[r] = _mm512_setzero_ps();
    if (rn == ROWS) {
        for (; j + 16 <= k; j += 16) {
            __m512 xv = _mm512_loadu_ps(x + j);
            for (int r = 0; r < ROWS; r++) {
                __m128i q = _mm_loadu_si128((const __m128i *)(w + r * k + j));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), xv, acc[r]);
            }
        }
    } else {
        for (; j + 16 <= k; j += 16) {
            __m512 xv = _mm512_loadu_ps(x + j);
            for (int r = 0; r < rn; r++) {
                __m128i q = _mm_loadu_si128((const __m128i *)(w + r * k + j));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), xv, acc[r]);
            }
        }
    }
    for (int r = 0; r < rn; r++) acc_s[r] = _mm512_reduce_add_ps(acc[r]);
#endif
    for (int r = 0; r < rn; r++) {
        float s = acc_s[r];
        for (int64_t jj = j; jj < k; jj++) s += (float)w[r * k + jj] * x[jj];
        out[r] = s;
    }
}

void int8_gemv(const int8_t *w, const float *scale, const float *x, float *y,
               int64_t n, int64_t k, int64_t m, int threads) {
    int64_t blocks = (n + ROWS - 1) / ROWS;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t r0 = b * ROWS;
        int64_t rn = n - r0 < ROWS ? n - r0 : ROWS;
        float out[ROWS];
        for (int64_t i = 0; i < m; i++) {
            rows_dot(w + r0 * k, x + i * k, k, rn, out);
            for (int64_t r = 0; r < rn; r++) y[i * n + r0 + r] = out[r] * scale[r0 + r];
        }
    }
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

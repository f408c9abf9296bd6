/* GGUF's quantized weights, kept as the file stores them, times fp32 activations (CPU).
 *
 *   y (m, rows) = x (m, cols) @ W^T,   W a QMatrix: (rows, cols) in one of GGUF's block formats,
 *                                       repacked at load into groups of 16 rows (quant_pack.py)
 *
 * How (llama.cpp's recipe, laid out for AVX-512 VNNI):
 *   - x is quantized per block of 32 values: xq = round(x / dx) in int8, dx = max|x| / 127, and the
 *     sums of xq per 16 values are kept (quantize_x). Once per linear, for every output row.
 *   - Every format is w = s * q + o per row and 16 or 32 values: q an unsigned 4-8 bit integer,
 *     s and o floats from the block's scales (Q5_0: s = d, o = -16 d; Q4_K: s = d * sc, o = -dmin * m).
 *     So  sum_j w_j x_j ~= dx * (s * sum_j q_j xq_j + o * sum_j xq_j):  the first sum is exact in
 *     int32 (vpdpbusd: 64 u8 x s8 products per instruction), the rest is two fp32 FMAs a block.
 *   - 16 rows are interleaved: in a 64-byte vector, 32-bit lane r holds 4 consecutive values of row
 *     r, so one vpdpbusd against 4 values of x broadcast advances 16 rows at once, and the 16 sums
 *     of a group never need a horizontal add (what llama.cpp's "repack" buffers do).
 *
 * Group layout (16 rows, blocks of 32 values in order; R = 16):
 *   a block's values v[0..31] per row sit in "chunks" c = 0..7 of 4 values (v[4c..4c+3])
 *   8-bit  : 8 vectors, vector c byte 4r+i = q of row r value 4c+i
 *   4-bit  : 4 vectors, vector c byte 4r+i = q[4c+i] | q[16+4c+i] << 4  (low nibble chunk c, high c+4)
 *   5th bit: 1 vector, byte 4r+i bit c = bit 4 of q[4c+i]
 *   6-bit  : 2 vectors, vector c/4 byte 4r+i bits 2(c%4)..+1 = bits 4-5 of q[4c+i]
 *   scales : fp16 s[16] (+ fp16 o[16] for Q4_1/Q5_1) before each block;
 *            K formats: a super-block header (fp16 d[16], dmin[16]; Q6_K: d[16]) every 8 blocks,
 *            then per block u8 sc[16], u8 m[16] (Q6_K: int8 sc[2][16], one per half)
 *   records: [scales][high bits][4- or 8-bit values]
 *
 * Without AVX-512 VNNI the same layout is read by plain loops (same integer sums, same result up to
 * the order of fp32 additions); tests/unit/test_quant_gemv.py checks both against gguf's
 * dequantized fp32 product. Threads split the row groups (OpenMP, torch's pool). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && !defined(FIMGATE_NO_SIMD)
#define QUANT_SIMD 1  /* AVX-512 VNNI: a group's 16 rows in one 64-byte vector */
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(FIMGATE_NO_SIMD)
#define QUANT_SIMD 2  /* AVX2: the same vectors as two 32-byte halves (rows 0-7, 8-15) */
#include <immintrin.h>
#else
#define QUANT_SIMD 0
#endif

#define R 16   /* rows per group */
#define QB 32  /* values per block */
#define SB 8   /* blocks per K super-block (256 values) */
#define XT 8   /* rows of x per tile: a group's weights are unpacked once for up to 8 rows */

/* GGUF's type numbers (gguf.GGMLQuantizationType) */
enum { Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14 };

typedef struct {
    const uint8_t *data;  /* groups of R rows, group_bytes each */
    int64_t rows, cols;
    int64_t format;       /* Q4_0 ... Q6_K */
    int64_t group_bytes;
} QMatrix;

static inline int is_k(int f) { return f == Q4_K || f == Q5_K || f == Q6_K; }
static inline int bits(int f) { return f == Q8_0 ? 8 : f == Q6_K ? 6 : (f == Q5_0 || f == Q5_1 || f == Q5_K) ? 5 : 4; }
static inline int value_bytes(int f) { return bits(f) == 8 ? 512 : 256; }
static inline int high_bytes(int f) { return bits(f) == 5 ? 64 : bits(f) == 6 ? 128 : 0; }
static inline int scale_bytes(int f) { return (f == Q4_1 || f == Q5_1) ? 64 : 32; }  /* s, o fp16; or sc (+ m) bytes */
static inline int record_bytes(int f) { return scale_bytes(f) + high_bytes(f) + value_bytes(f); }
static inline int header_bytes(int f) { return f == Q6_K ? 32 : is_k(f) ? 64 : 0; }

/* Rows of x a tile takes: 8, but 4 for 8-bit weights (they need all 8 chunk registers loaded,
 * and 8 rows' accumulators beside them spill: measured slower) */
static inline int tile_rows(int f) { return f == Q8_0 ? 4 : XT; }

/* The offset subtracted as a multiple of s (w = s * (q - C)), 0 where o is stored. */
static inline int offset_c(int f) { return f == Q4_0 ? 8 : f == Q5_0 ? 16 : f == Q8_0 ? 128 : f == Q6_K ? 32 : 0; }

/* Bytes of one group of R rows with `cols` values each (quant_pack.py writes the same). */
int64_t quant_group_bytes(int64_t format, int64_t cols) {
    int f = (int)format;
    int64_t nb = cols / QB;
    return nb * record_bytes(f) + (is_k(f) ? (nb / SB) * header_bytes(f) : 0);
}

static inline const uint8_t *record(const uint8_t *g, int f, int64_t b) {
    if (!is_k(f)) return g + b * record_bytes(f);
    return g + (b / SB) * (header_bytes(f) + SB * record_bytes(f)) + header_bytes(f) + (b % SB) * record_bytes(f);
}

static inline const uint8_t *header(const uint8_t *g, int f, int64_t b) {
    return g + (b / SB) * (header_bytes(f) + SB * record_bytes(f));
}

static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else {  /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000 | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- x: quantized per block of 32 ------------------------------------------------------------ */

/* x (m, k) fp32 -> xq (m, k) int8, dx (m, k/32), xs (m, k/16) int32 sums of xq per 16 values. */
void quantize_x(const float *x, int64_t m, int64_t k, int8_t *xq, float *dx, int32_t *xs) {
    int64_t nb = k / QB;
    for (int64_t i = 0; i < m; i++)
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + i * k + b * QB;
            int8_t *q = xq + i * k + b * QB;
            float amax = 0.0f;
            for (int j = 0; j < QB; j++) amax = fmaxf(amax, fabsf(v[j]));
            float d = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
            int32_t s0 = 0, s1 = 0;
            for (int j = 0; j < QB; j++) {
                int32_t r = (int32_t)nearbyintf(v[j] * inv);
                r = r > 127 ? 127 : r < -127 ? -127 : r;
                q[j] = (int8_t)r;
                if (j < 16) s0 += r; else s1 += r;
            }
            dx[i * nb + b] = d;
            xs[i * 2 * nb + 2 * b] = s0;
            xs[i * 2 * nb + 2 * b + 1] = s1;
        }
}

/* ---- one value of the layout (the plain path and dequant) ------------------------------------- */

static inline int value_of(const uint8_t *rec, int f, int r, int j) {
    const uint8_t *hb = rec + scale_bytes(f), *vals = hb + high_bytes(f);
    int c = j / 4, i = j % 4, q;
    if (bits(f) == 8) return vals[c * 64 + 4 * r + i];
    q = c < 4 ? vals[c * 64 + 4 * r + i] & 0x0f : vals[(c - 4) * 64 + 4 * r + i] >> 4;
    if (bits(f) == 5) q |= ((hb[4 * r + i] >> c) & 1) << 4;
    if (bits(f) == 6) q |= ((hb[(c / 4) * 64 + 4 * r + i] >> (2 * (c % 4))) & 3) << 4;
    return q;
}

/* s and o of row r in block b, half h (w = s q + o). */
static inline void scale_of(const uint8_t *g, int f, int64_t b, int r, int h, float *s, float *o) {
    const uint8_t *rec = record(g, f, b);
    const uint16_t *h16 = (const uint16_t *)rec;
    if (!is_k(f)) {
        *s = half_to_float(h16[r]);
        *o = (f == Q4_1 || f == Q5_1) ? half_to_float(h16[R + r]) : -(float)offset_c(f) * *s;
        return;
    }
    const uint16_t *hd = (const uint16_t *)header(g, f, b);
    if (f == Q6_K) {
        *s = half_to_float(hd[r]) * (float)((const int8_t *)rec)[h * R + r];
        *o = -32.0f * *s;
        return;
    }
    *s = half_to_float(hd[r]) * (float)rec[r];
    *o = -half_to_float(hd[R + r]) * (float)rec[R + r];
}

/* ---- one group of R rows against a tile of up to XT rows of x: out[i][r] ---------------------- */

#if QUANT_SIMD == 1
/* the chunk vectors of block `rec`: w[c] lane r = 4 unsigned values of row r */
static inline __attribute__((always_inline)) void unpack(const uint8_t *rec, const int f, __m512i w[8]) {
    const uint8_t *hb = rec + scale_bytes(f), *vals = hb + high_bytes(f);
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    if (bits(f) == 8) {
        for (int c = 0; c < 8; c++) w[c] = _mm512_loadu_si512(vals + 64 * c);
        return;
    }
    for (int c = 0; c < 4; c++) {
        __m512i v = _mm512_loadu_si512(vals + 64 * c);
        w[c] = _mm512_and_si512(v, lo4);
        w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
    }
    if (bits(f) == 5) {  /* bit c of each byte -> bit 4 */
        __m512i h = _mm512_loadu_si512(hb);
        const __m512i b4 = _mm512_set1_epi8(0x10);
        w[0] = _mm512_or_si512(w[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), b4));
        w[1] = _mm512_or_si512(w[1], _mm512_and_si512(_mm512_slli_epi16(h, 3), b4));
        w[2] = _mm512_or_si512(w[2], _mm512_and_si512(_mm512_slli_epi16(h, 2), b4));
        w[3] = _mm512_or_si512(w[3], _mm512_and_si512(_mm512_slli_epi16(h, 1), b4));
        w[4] = _mm512_or_si512(w[4], _mm512_and_si512(h, b4));
        w[5] = _mm512_or_si512(w[5], _mm512_and_si512(_mm512_srli_epi16(h, 1), b4));
        w[6] = _mm512_or_si512(w[6], _mm512_and_si512(_mm512_srli_epi16(h, 2), b4));
        w[7] = _mm512_or_si512(w[7], _mm512_and_si512(_mm512_srli_epi16(h, 3), b4));
    }
    if (bits(f) == 6) {  /* bits 2c, 2c+1 of each byte -> bits 4, 5 */
        const __m512i b45 = _mm512_set1_epi8(0x30);
        for (int half = 0; half < 2; half++) {
            __m512i h = _mm512_loadu_si512(hb + 64 * half);
            __m512i *v = w + 4 * half;
            v[0] = _mm512_or_si512(v[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), b45));
            v[1] = _mm512_or_si512(v[1], _mm512_and_si512(_mm512_slli_epi16(h, 2), b45));
            v[2] = _mm512_or_si512(v[2], _mm512_and_si512(h, b45));
            v[3] = _mm512_or_si512(v[3], _mm512_and_si512(_mm512_srli_epi16(h, 2), b45));
        }
    }
}

static inline __m512 cvt_half16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 cvt_u8x16(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
static inline __m512 cvt_i8x16(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

static inline __attribute__((always_inline)) void group_tile(const uint8_t *g, const int f, int64_t nb, const int8_t *xq,
                                                              const float *dx, const int32_t *xs, int64_t k, const int mt,
                                                              float *out) {
    __m512 y[XT];
    __m512 d = _mm512_setzero_ps(), dmin = _mm512_setzero_ps();
    for (int i = 0; i < mt; i++) y[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = record(g, f, b);
        if (is_k(f) && b % SB == 0) {
            const uint8_t *hd = header(g, f, b);
            d = cvt_half16(hd);
            if (f != Q6_K) dmin = cvt_half16(hd + 32);
        }
        __m512i w[8];
        unpack(rec, f, w);
        __m512 s0, s1 = _mm512_setzero_ps(), o = _mm512_setzero_ps();
        if (f == Q6_K) {
            s0 = _mm512_mul_ps(d, cvt_i8x16(rec));
            s1 = _mm512_mul_ps(d, cvt_i8x16(rec + R));
        } else if (is_k(f)) {
            s0 = _mm512_mul_ps(d, cvt_u8x16(rec));
            o = _mm512_mul_ps(dmin, cvt_u8x16(rec + R));  /* subtracted below */
        } else {
            s0 = cvt_half16(rec);
            if (f == Q4_1 || f == Q5_1) o = cvt_half16(rec + 32);
        }
        for (int i = 0; i < mt; i++) {
            const int32_t *xb = (const int32_t *)(xq + i * k + b * QB);
            __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
            for (int c = 0; c < 4; c++) a0 = _mm512_dpbusd_epi32(a0, w[c], _mm512_set1_epi32(xb[c]));
            for (int c = 4; c < 8; c++) a1 = _mm512_dpbusd_epi32(a1, w[c], _mm512_set1_epi32(xb[c]));
            float dxb = dx[i * nb + b];
            int32_t x0 = xs[i * 2 * nb + 2 * b], x1 = xs[i * 2 * nb + 2 * b + 1];
            __m512 vdx = _mm512_set1_ps(dxb);
            if (f == Q6_K) {
                a0 = _mm512_sub_epi32(a0, _mm512_set1_epi32(32 * x0));
                a1 = _mm512_sub_epi32(a1, _mm512_set1_epi32(32 * x1));
                y[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), _mm512_mul_ps(s0, vdx), y[i]);
                y[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), _mm512_mul_ps(s1, vdx), y[i]);
            } else if (offset_c(f)) {
                __m512i a = _mm512_sub_epi32(_mm512_add_epi32(a0, a1), _mm512_set1_epi32(offset_c(f) * (x0 + x1)));
                y[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(s0, vdx), y[i]);
            } else {
                y[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_mul_ps(s0, vdx), y[i]);
                __m512 sx = _mm512_set1_ps(dxb * (float)(x0 + x1));
                y[i] = is_k(f) ? _mm512_fnmadd_ps(o, sx, y[i]) : _mm512_fmadd_ps(o, sx, y[i]);
            }
        }
    }
    for (int i = 0; i < mt; i++) _mm512_storeu_ps(out + i * R, y[i]);
}
#elif QUANT_SIMD == 2
/* AVX2 (most laptops and AMD before Zen 4): the AVX-512 path above, each 64-byte vector as two
 * 32-byte halves, h = 0 for rows 0-7 and h = 1 for rows 8-15. vpdpbusd becomes vpmaddubsw (u8 x s8
 * pairs to int16) then vpmaddwd against ones (pairs to int32): exact for 4-6 bit values (a pair is
 * at most 2 * 63 * 127 < 32767); 8-bit values are made signed first (w - 128: Q8_0's own q) and
 * multiplied as |w| times x with w's sign (a pair at most 2 * 128 * 127), so their sums are already
 * less 128 * sum(x), the offset the other paths subtract. */
static inline __attribute__((always_inline)) void unpack2(const uint8_t *rec, const int f, const int h, __m256i w[8]) {
    const uint8_t *hb = rec + scale_bytes(f), *vals = hb + high_bytes(f);
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    if (bits(f) == 8) {
        for (int c = 0; c < 8; c++) w[c] = _mm256_loadu_si256((const __m256i *)(vals + 64 * c + 32 * h));
        return;
    }
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(vals + 64 * c + 32 * h));
        w[c] = _mm256_and_si256(v, lo4);
        w[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
    }
    if (bits(f) == 5) {  /* bit c of each byte -> bit 4 */
        __m256i hi = _mm256_loadu_si256((const __m256i *)(hb + 32 * h));
        const __m256i b4 = _mm256_set1_epi8(0x10);
        w[0] = _mm256_or_si256(w[0], _mm256_and_si256(_mm256_slli_epi16(hi, 4), b4));
        w[1] = _mm256_or_si256(w[1], _mm256_and_si256(_mm256_slli_epi16(hi, 3), b4));
        w[2] = _mm256_or_si256(w[2], _mm256_and_si256(_mm256_slli_epi16(hi, 2), b4));
        w[3] = _mm256_or_si256(w[3], _mm256_and_si256(_mm256_slli_epi16(hi, 1), b4));
        w[4] = _mm256_or_si256(w[4], _mm256_and_si256(hi, b4));
        w[5] = _mm256_or_si256(w[5], _mm256_and_si256(_mm256_srli_epi16(hi, 1), b4));
        w[6] = _mm256_or_si256(w[6], _mm256_and_si256(_mm256_srli_epi16(hi, 2), b4));
        w[7] = _mm256_or_si256(w[7], _mm256_and_si256(_mm256_srli_epi16(hi, 3), b4));
    }
    if (bits(f) == 6) {  /* bits 2c, 2c+1 of each byte -> bits 4, 5 */
        const __m256i b45 = _mm256_set1_epi8(0x30);
        for (int half = 0; half < 2; half++) {
            __m256i hi = _mm256_loadu_si256((const __m256i *)(hb + 64 * half + 32 * h));
            __m256i *v = w + 4 * half;
            v[0] = _mm256_or_si256(v[0], _mm256_and_si256(_mm256_slli_epi16(hi, 4), b45));
            v[1] = _mm256_or_si256(v[1], _mm256_and_si256(_mm256_slli_epi16(hi, 2), b45));
            v[2] = _mm256_or_si256(v[2], _mm256_and_si256(hi, b45));
            v[3] = _mm256_or_si256(v[3], _mm256_and_si256(_mm256_srli_epi16(hi, 2), b45));
        }
    }
}

/* per 32-bit lane: the sum over chunks c0 .. c0+3 of the 4 products of w[c]'s bytes and x's 4 bytes
 * (xb[c]). Unsigned w (4-6 bits): vpmaddubsw's int16 pair sums are added in int16 while they
 * cannot pass 32767 (4 chunks of 4-5 bit values: 4 * 2 * 31 * 127; 2 chunks of 6-bit values),
 * then widened once. 8-bit w, signed: |w| times x with w's sign, each chunk widened alone. */
static inline __attribute__((always_inline)) __m256i dot16(const __m256i *w, const int32_t *xb, const int f) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int fold = bits(f) <= 5 ? 4 : bits(f) == 6 ? 2 : 1;  /* chunks summed in int16 */
    __m256i acc = _mm256_setzero_si256(), p = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i x = _mm256_set1_epi32(xb[c]), q;
        if (bits(f) == 8)
            q = _mm256_maddubs_epi16(_mm256_abs_epi8(w[c]), _mm256_sign_epi8(x, w[c]));  /* |w| <= 128, |x| <= 127 */
        else
            q = _mm256_maddubs_epi16(w[c], x);
        p = c % fold ? _mm256_add_epi16(p, q) : q;
        if (c % fold == fold - 1) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    return acc;
}

static inline __m256 cvt_half8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 cvt_u8x8(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
static inline __m256 cvt_i8x8(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* rows 8h .. 8h+7 of the group */
static inline __attribute__((always_inline)) void group_half(const uint8_t *g, const int f, int64_t nb, const int8_t *xq,
                                                              const float *dx, const int32_t *xs, int64_t k, const int mt,
                                                              const int h, float *out) {
    __m256 y[XT];
    __m256 d = _mm256_setzero_ps(), dmin = _mm256_setzero_ps();
    const int eight = bits(f) == 8;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int i = 0; i < mt; i++) y[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = record(g, f, b);
        if (is_k(f) && b % SB == 0) {
            const uint8_t *hd = header(g, f, b);
            d = cvt_half8(hd + 16 * h);
            if (f != Q6_K) dmin = cvt_half8(hd + 32 + 16 * h);
        }
        __m256i w[8];
        unpack2(rec, f, h, w);
        if (eight)
            for (int c = 0; c < 8; c++) w[c] = _mm256_xor_si256(w[c], flip);  /* w - 128, as int8 */
        __m256 s0, s1 = _mm256_setzero_ps(), o = _mm256_setzero_ps();
        if (f == Q6_K) {
            s0 = _mm256_mul_ps(d, cvt_i8x8(rec + 8 * h));
            s1 = _mm256_mul_ps(d, cvt_i8x8(rec + R + 8 * h));
        } else if (is_k(f)) {
            s0 = _mm256_mul_ps(d, cvt_u8x8(rec + 8 * h));
            o = _mm256_mul_ps(dmin, cvt_u8x8(rec + R + 8 * h));  /* subtracted below */
        } else {
            s0 = cvt_half8(rec + 16 * h);
            if (f == Q4_1 || f == Q5_1) o = cvt_half8(rec + 32 + 16 * h);
        }
        for (int i = 0; i < mt; i++) {
            const int32_t *xb = (const int32_t *)(xq + i * k + b * QB);
            __m256i a0 = dot16(w, xb, f), a1 = dot16(w + 4, xb + 4, f);
            float dxb = dx[i * nb + b];
            int32_t x0 = xs[i * 2 * nb + 2 * b], x1 = xs[i * 2 * nb + 2 * b + 1];
            __m256 vdx = _mm256_set1_ps(dxb);
            if (f == Q6_K) {
                a0 = _mm256_sub_epi32(a0, _mm256_set1_epi32(32 * x0));
                a1 = _mm256_sub_epi32(a1, _mm256_set1_epi32(32 * x1));
                y[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a0), _mm256_mul_ps(s0, vdx), y[i]);
                y[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1), _mm256_mul_ps(s1, vdx), y[i]);
            } else if (offset_c(f)) {  /* (8-bit: the sums are already of w - 128) */
                int32_t off = eight ? 0 : offset_c(f) * (x0 + x1);
                __m256i a = _mm256_sub_epi32(_mm256_add_epi32(a0, a1), _mm256_set1_epi32(off));
                y[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(s0, vdx), y[i]);
            } else {
                y[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a0, a1)), _mm256_mul_ps(s0, vdx), y[i]);
                __m256 sx = _mm256_set1_ps(dxb * (float)(x0 + x1));
                y[i] = is_k(f) ? _mm256_fnmadd_ps(o, sx, y[i]) : _mm256_fmadd_ps(o, sx, y[i]);
            }
        }
    }
    for (int i = 0; i < mt; i++) _mm256_storeu_ps(out + i * R + 8 * h, y[i]);
}

static inline __attribute__((always_inline)) void group_tile(const uint8_t *g, const int f, int64_t nb, const int8_t *xq,
                                                              const float *dx, const int32_t *xs, int64_t k, const int mt,
                                                              float *out) {
    group_half(g, f, nb, xq, dx, xs, k, mt, 0, out);
    group_half(g, f, nb, xq, dx, xs, k, mt, 1, out);
}
#else
static inline void group_tile(const uint8_t *g, const int f, int64_t nb, const int8_t *xq, const float *dx,
                              const int32_t *xs, int64_t k, const int mt, float *out) {
    for (int i = 0; i < mt; i++)
        for (int r = 0; r < R; r++) {
            float y = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *rec = record(g, f, b);
                const int8_t *xb = xq + i * k + b * QB;
                int32_t a[2] = {0, 0};
                for (int j = 0; j < QB; j++) a[j / 16] += value_of(rec, f, r, j) * xb[j];
                float dxb = dx[i * nb + b], s0, s1, o;
                int32_t x0 = xs[i * 2 * nb + 2 * b], x1 = xs[i * 2 * nb + 2 * b + 1];
                scale_of(g, f, b, r, 0, &s0, &o);
                if (f == Q6_K) {
                    scale_of(g, f, b, r, 1, &s1, &o);
                    y += (float)(a[0] - 32 * x0) * (s0 * dxb);
                    y += (float)(a[1] - 32 * x1) * (s1 * dxb);
                } else if (offset_c(f)) {
                    y += (float)(a[0] + a[1] - offset_c(f) * (x0 + x1)) * (s0 * dxb);
                } else {
                    y += (float)(a[0] + a[1]) * (s0 * dxb);
                    y += o * (dxb * (float)(x0 + x1));
                }
            }
            out[i * R + r] = y;
        }
}
#endif

/* A copy of group_tile per format and tile height, each with both as constants: the accumulators
 * then live in registers (with a variable height they were spilled to the stack, and every FMA
 * waited on a store). */
#define TILES(F)                                                            \
    case F:                                                                 \
        switch (mt) {                                                       \
        case 1: group_tile(g, F, nb, xq, dx, xs, k, 1, out); break;         \
        case 2: group_tile(g, F, nb, xq, dx, xs, k, 2, out); break;         \
        case 3: group_tile(g, F, nb, xq, dx, xs, k, 3, out); break;         \
        case 4: group_tile(g, F, nb, xq, dx, xs, k, 4, out); break;         \
        case 5: group_tile(g, F, nb, xq, dx, xs, k, 5, out); break;         \
        case 6: group_tile(g, F, nb, xq, dx, xs, k, 6, out); break;         \
        case 7: group_tile(g, F, nb, xq, dx, xs, k, 7, out); break;         \
        default: group_tile(g, F, nb, xq, dx, xs, k, 8, out); break;        \
        }                                                                   \
        break;

static void group_dispatch(const uint8_t *g, int f, int64_t nb, const int8_t *xq, const float *dx, const int32_t *xs,
                           int64_t k, int mt, float *out) {
    switch (f) {
        TILES(Q4_0) TILES(Q4_1) TILES(Q5_0) TILES(Q5_1) TILES(Q8_0) TILES(Q4_K) TILES(Q5_K) TILES(Q6_K)
    }
}
#undef TILES

/* Group index t of the `n` matrices taken together -> (matrix, group within it). */
static inline int locate(const QMatrix *ws, int n, int64_t t, int64_t *gi) {
    int j = 0;
    for (; j < n - 1; j++) {
        int64_t groups = (ws[j].rows + R - 1) / R;
        if (t < groups) break;
        t -= groups;
    }
    *gi = t;
    return j;
}

/* y = x W^T for `n` matrices sharing the input (q, k, v; gate, up), written side by side:
 * y (m, sum of rows) row i = [x_i W_0^T, x_i W_1^T, ...]. x is given quantized (quantize_x);
 * all the matrices' row groups are split across threads in one parallel loop. */
void quant_gemv_multi(const QMatrix *ws, int n, const int8_t *xq, const float *dx, const int32_t *xs, float *y,
                      int64_t m, int threads) {
    int64_t total = 0, ystride = 0;
    for (int j = 0; j < n; j++) {
        total += (ws[j].rows + R - 1) / R;
        ystride += ws[j].rows;
    }
    int64_t k = ws[0].cols, nb = k / QB;
    /* each thread a contiguous run of groups (one sequential read each: interleaving two or four
     * runs a thread, or prefetching ahead, measured slower or no faster here) */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < total; t++) {
        int64_t gi;
        int j = locate(ws, n, t, &gi);
        int64_t ycol = 0;
        for (int jj = 0; jj < j; jj++) ycol += ws[jj].rows;
        const QMatrix *w = ws + j;
        const uint8_t *g = w->data + gi * w->group_bytes;
        int64_t r0 = gi * R, rn = w->rows - r0 < R ? w->rows - r0 : R;
        float out[XT * R];
        const int xt = tile_rows((int)w->format);
        for (int64_t i0 = 0; i0 < m; i0 += xt) {
            int mt = m - i0 < xt ? (int)(m - i0) : xt;
            group_dispatch(g, (int)w->format, nb, xq + i0 * k, dx + i0 * nb, xs + i0 * 2 * nb, k, mt, out);
            for (int a = 0; a < mt; a++) memcpy(y + (i0 + a) * ystride + ycol + r0, out + a * R, rn * sizeof(float));
        }
    }
}

/* Bytes of work space quant_gemv needs for m rows of x with `cols` values (twice m with residual). */
int64_t quant_workspace(int64_t m, int64_t cols) {
    return ((m * cols + 63) & ~(int64_t)63) + m * (cols / QB) * (int64_t)(sizeof(float) + 2 * sizeof(int32_t)) + 64;
}

/* quant_gemv_multi for fp32 x (m, cols): x quantized into `work` (quant_workspace bytes) first.
 * residual: each row of x goes as two rows of 8-bit blocks - x quantized, then what that rounding
 * left out, quantized again (scales ~254x smaller) - and y is their sum: activations good to ~16
 * bits for the price of a 2-row product, which a one-token step hardly notices (it waits on the
 * weights' reads, done once for both rows). y2: room for (2m, rows) floats then. */
void quant_gemv(const QMatrix *ws, int n, const float *x, float *y, int64_t m, void *work, int threads, int residual,
                float *y2) {
    int64_t k = ws[0].cols, nb = k / QB, rows = 0, mq = residual ? 2 * m : m;
    for (int j = 0; j < n; j++) rows += ws[j].rows;
    int8_t *xq = (int8_t *)work;
    float *dx = (float *)(xq + ((mq * k + 63) & ~(int64_t)63));
    int32_t *xs = (int32_t *)(dx + mq * nb);
    if (!residual) {
        quantize_x(x, m, k, xq, dx, xs);
        quant_gemv_multi(ws, n, xq, dx, xs, y, m, threads);
        return;
    }
    float rest[QB];
    for (int64_t i = 0; i < m; i++) {
        quantize_x(x + i * k, 1, k, xq + 2 * i * k, dx + 2 * i * nb, xs + 2 * i * 2 * nb);
        for (int64_t b = 0; b < nb; b++) {  /* what the first rounding left, a block at a time */
            const float d = dx[2 * i * nb + b];
            for (int j = 0; j < QB; j++) rest[j] = x[i * k + b * QB + j] - (float)xq[2 * i * k + b * QB + j] * d;
            quantize_x(rest, 1, QB, xq + (2 * i + 1) * k + b * QB, dx + (2 * i + 1) * nb + b, xs + (2 * i + 1) * 2 * nb + 2 * b);
        }
    }
    quant_gemv_multi(ws, n, xq, dx, xs, y2, mq, threads);
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = 0; r < rows; r++) y[i * rows + r] = y2[2 * i * rows + r] + y2[(2 * i + 1) * rows + r];
}

/* Rows [row0, row0 + nrows) of W dequantized: out (nrows, cols), fp32 (bf16 = 0) or bf16 bit
 * patterns rounded to nearest even (bf16 = 1). */
void quant_dequant(const QMatrix *w, int64_t row0, int64_t nrows, void *out, int bf16, int threads) {
    int f = (int)w->format;
    int64_t k = w->cols, nb = k / QB;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t rr = 0; rr < nrows; rr++) {
        int64_t row = row0 + rr;
        const uint8_t *g = w->data + (row / R) * w->group_bytes;
        int r = (int)(row % R);
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *rec = record(g, f, b);
            for (int h = 0; h < 2; h++) {
                float s, o;
                scale_of(g, f, b, r, h, &s, &o);
                for (int j = 16 * h; j < 16 * h + 16; j++) {
                    float v = s * (float)value_of(rec, f, r, j) + o;
                    int64_t at = rr * k + b * QB + j;
                    if (bf16) {
                        uint32_t u;
                        memcpy(&u, &v, sizeof u);
                        u += 0x7fff + ((u >> 16) & 1);
                        ((uint16_t *)out)[at] = (uint16_t)(u >> 16);
                    } else {
                        ((float *)out)[at] = v;
                    }
                }
            }
        }
    }
}

/* The rows `rows[0..n)` of W in fp32, out (n, cols): an embedding lookup. */
void quant_dequant_rows(const QMatrix *w, const int64_t *rows, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) quant_dequant(w, rows[i], 1, out + i * w->cols, 0, 1);
}

int quant_simd(void) { return QUANT_SIMD; }

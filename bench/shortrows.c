/* Issue 18, short rows: hand-written SpMV kernels (y = A x, CSR, one thread) that keep each
 * row's sum in stored order, timed against the plain row loop. Not part of the compiler: the
 * measurements behind BENCHMARKS.md "## SpMV: y = A x", subsection "Short rows".
 *
 *   bench/.venv/bin/python bench/shortrows_data.py /tmp/sr18      (writes the .bin inputs)
 *   cc -O3 -march=native -ffp-contract=off -o /tmp/sr18/shortrows bench/shortrows.c
 *   /tmp/sr18/shortrows /tmp/sr18/delaunay_n17.bin 100
 *
 * Input (.bin, little-endian): rows, cols, nnz (i64), then ptr[rows + 1], idx[nnz] (i64),
 * val[nnz], x[cols] (f64). Every variant's y must equal the plain loop's bit for bit (each
 * row summed from y[i] = 0 in stored order, IEEE products, no fused multiply-add: hence
 * -ffp-contract=off, as the C backend compiles); the program says so per variant. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int64_t I;
static I n, m, nnz;
static I *ptr, *idx;
static int32_t *idx32;
static double *val, *x;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The rows from `i` on, one after another: what Tessera's kernel does on short rows. */
static void rows_from(double *restrict y, I i) {
    for (; i < n; i++) {
        double acc = y[i];
        for (I q = ptr[i]; q < ptr[i + 1]; q++) acc = acc + val[q] * x[idx[q]];
        y[i] = acc;
    }
}

__attribute__((noinline)) static void base(double *restrict y) { rows_from(y, 0); }

/* 32-bit column indices (SciPy's and MKL's width). */
__attribute__((noinline)) static void base_i32(double *restrict y) {
    for (I i = 0; i < n; i++) {
        double acc = y[i];
        for (I q = ptr[i]; q < ptr[i + 1]; q++) acc = acc + val[q] * x[idx32[q]];
        y[i] = acc;
    }
}

/* R adjacent rows walked together for the longest one's count of steps, a row past its end
 * left out of the step ("predicated"; GCC 12 turns these selects back into branches). */
#define SELBLOCK(NAME, R)                                                                   \
    __attribute__((noinline)) static void NAME(double *restrict y) {                        \
        I i = 0;                                                                            \
        for (; i + R <= n; i += R) {                                                        \
            I s[R], e[R], mx = 0;                                                           \
            double a[R];                                                                    \
            for (int r = 0; r < R; r++) {                                                   \
                s[r] = ptr[i + r];                                                          \
                e[r] = ptr[i + r + 1];                                                      \
                a[r] = y[i + r];                                                            \
                mx = e[r] - s[r] > mx ? e[r] - s[r] : mx;                                   \
            }                                                                               \
            for (I k = 0; k < mx; k++)                                                      \
                for (int r = 0; r < R; r++) {                                               \
                    I q = s[r] + k;                                                         \
                    int live = q < e[r];                                                    \
                    I qq = live ? q : 0;                                                    \
                    double t = a[r] + val[qq] * x[idx[qq]];                                 \
                    a[r] = live ? t : a[r];                                                 \
                }                                                                           \
            for (int r = 0; r < R; r++) y[i + r] = a[r];                                    \
        }                                                                                   \
        rows_from(y, i);                                                                    \
    }
SELBLOCK(selblock2, 2)
SELBLOCK(selblock4, 4)

/* One walk over all entries in each half of the rows (two independent walks), the row's
 * end, accumulator and row number advanced by selects: no branch on a row's end. */
__attribute__((noinline)) static void flat2(double *restrict y) {
    I h = n / 2, row[2] = {0, h}, stop[2] = {h, n}, k[2], end[2], steps[2];
    double a[2];
    for (int s = 0; s < 2; s++) {
        k[s] = ptr[row[s]];
        end[s] = row[s] < stop[s] ? ptr[row[s] + 1] : 0;
        a[s] = row[s] < stop[s] ? y[row[s]] : 0;
        steps[s] = (ptr[stop[s]] - ptr[row[s]]) + (stop[s] - row[s]);
    }
    I common = steps[0] < steps[1] ? steps[0] : steps[1];
    for (I t = 0; t < common; t++)
        for (int s = 0; s < 2; s++) {
            int in = k[s] < end[s];
            I qq = in ? k[s] : 0;
            double sum = a[s] + val[qq] * x[idx[qq]];
            if (!in) y[row[s]] = a[s];
            I nr = row[s] + !in;
            I ne = ptr[nr + 1 < n + 1 ? nr + 1 : n];
            a[s] = in ? sum : y[nr < n ? nr : 0];
            k[s] += in;
            row[s] = nr;
            end[s] = in ? end[s] : ne;
        }
    for (int s = 0; s < 2; s++)
        for (; row[s] < stop[s]; row[s]++) {
            double acc = a[s];
            for (I q = k[s]; q < ptr[row[s] + 1]; q++) acc = acc + val[q] * x[idx[q]];
            y[row[s]] = acc;
            k[s] = ptr[row[s] + 1];
            a[s] = row[s] + 1 < stop[s] ? y[row[s] + 1] : 0;
        }
}

/* AVX-512, 8 adjacent rows as the 8 lanes: step k gathers entry k of every row (masked past
 * a row's end) and adds it to that row's lane, so each row is summed in stored order. */
#define AVX8(NAME, ZERO_RULE, I32)                                                           \
    __attribute__((noinline)) static void NAME(double *restrict y) {                         \
        I i = 0;                                                                             \
        for (; i + 8 <= n; i += 8) {                                                         \
            __m512i s = _mm512_loadu_si512(ptr + i), e = _mm512_loadu_si512(ptr + i + 1);    \
            __m512d a0 = _mm512_loadu_pd(y + i), a = a0;                                     \
            I mx = _mm512_reduce_max_epi64(_mm512_sub_epi64(e, s));                          \
            __m512i q = s;                                                                   \
            for (I k = 0; k < mx; k++) {                                                     \
                __mmask8 live = _mm512_cmplt_epi64_mask(q, e);                               \
                __m512d v = _mm512_mask_i64gather_pd(_mm512_setzero_pd(), live, q, val, 8);  \
                __m512d xv;                                                                  \
                if (I32) {                                                                   \
                    __m256i j = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), live, q, \
                                                            idx32, 4);                       \
                    xv = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), live, j, x, 8);       \
                } else {                                                                     \
                    __m512i j = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), live, q, \
                                                            idx, 8);                         \
                    xv = _mm512_mask_i64gather_pd(_mm512_setzero_pd(), live, j, x, 8);       \
                }                                                                            \
                a = _mm512_mask_add_pd(a, live, a, _mm512_mul_pd(v, xv));                    \
                q = _mm512_add_epi64(q, _mm512_set1_epi64(1));                               \
            }                                                                                \
            _mm512_storeu_pd(y + i, a);                                                      \
            if (ZERO_RULE) {                                                                 \
                /* Tessera's IEEE-product rule: a zero or NaN sum is summed again with */    \
                /* strong-zero products (0 * anything = +0). */                              \
                __mmask8 again = _mm512_cmp_pd_mask(a, _mm512_setzero_pd(), _CMP_EQ_UQ);     \
                double init[8];                                                              \
                _mm512_storeu_pd(init, a0);                                                  \
                while (again) {                                                              \
                    int r = __builtin_ctz(again);                                            \
                    again &= again - 1;                                                      \
                    double acc = init[r];                                                    \
                    for (I qq = ptr[i + r]; qq < ptr[i + r + 1]; qq++) {                     \
                        double p = val[qq] * x[idx[qq]];                                     \
                        if (!(__builtin_fabs(p) > 0.0) && (val[qq] == 0.0 || x[idx[qq]] == 0.0)) \
                            p = 0.0;                                                         \
                        acc = acc + p;                                                       \
                    }                                                                        \
                    y[i + r] = acc;                                                          \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        rows_from(y, i);                                                                     \
    }
AVX8(avx8, 0, 0)
AVX8(avx8_zero_rule, 1, 0)
AVX8(avx8_i32, 0, 1)

/* Sliced ELLPACK (SELL-8, no row sorting): rows 8s..8s+7 form slice s, stored column by
 * column (entry k of the slice's 8 rows are 8 consecutive slots), padded to the slice's
 * longest row. Lane r sums row 8s+r in stored order, slots past a row's end masked off, so
 * results are the plain loop's bits; the values and indices of a step are one contiguous
 * vector load each, only x is gathered. Built by `sell_build` (not timed). */
static I *sptr, *slen, *sidx;
static int32_t *sidx32;
static double *sval;

static void sell_build(void) {
    I slices = (n + 7) / 8, slots = 0;
    sptr = malloc(8 * (slices + 1)), slen = calloc(8 * slices, 8);
    for (I s = 0; s < slices; s++) {
        I mx = 0;
        for (I r = 8 * s; r < 8 * s + 8 && r < n; r++) {
            slen[r] = ptr[r + 1] - ptr[r];
            mx = slen[r] > mx ? slen[r] : mx;
        }
        sptr[s] = slots;
        slots += 8 * mx;
    }
    sptr[slices] = slots;
    sidx = calloc(slots, 8), sidx32 = calloc(slots, 4), sval = calloc(slots, 8);
    for (I r = 0; r < n; r++)
        for (I k = 0; k < slen[r]; k++) {
            I o = sptr[r / 8] + 8 * k + r % 8;
            sidx[o] = idx[ptr[r] + k], sidx32[o] = (int32_t)idx[ptr[r] + k];
            sval[o] = val[ptr[r] + k];
        }
    printf("SELL-8: %lld slots for %lld entries (%.3f)\n", (long long)slots, (long long)nnz,
           (double)slots / nnz);
}

#define SELL8(NAME, I32)                                                                      \
    __attribute__((noinline)) static void NAME(double *restrict y) {                          \
        for (I s = 0; 8 * s < n; s++) {                                                       \
            __mmask8 rows = n - 8 * s >= 8 ? 0xff : (__mmask8)((1u << (n - 8 * s)) - 1);      \
            __m512d a = _mm512_mask_loadu_pd(_mm512_setzero_pd(), rows, y + 8 * s);           \
            __m512i len = _mm512_loadu_si512(slen + 8 * s);                                   \
            I steps = (sptr[s + 1] - sptr[s]) / 8;                                            \
            for (I k = 0; k < steps; k++) {                                                   \
                __mmask8 live = _mm512_cmpgt_epi64_mask(len, _mm512_set1_epi64(k));           \
                I o = sptr[s] + 8 * k;                                                        \
                __m512d v = _mm512_loadu_pd(sval + o), xv;                                    \
                if (I32)                                                                      \
                    xv = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), live,                  \
                                                  _mm256_loadu_si256((void *)(sidx32 + o)), x, 8); \
                else                                                                          \
                    xv = _mm512_mask_i64gather_pd(_mm512_setzero_pd(), live,                  \
                                                  _mm512_loadu_si512(sidx + o), x, 8);        \
                a = _mm512_mask_add_pd(a, live, a, _mm512_mul_pd(v, xv));                     \
            }                                                                                 \
            _mm512_mask_storeu_pd(y + 8 * s, rows, a);                                        \
        }                                                                                     \
    }
SELL8(sell8, 0)
SELL8(sell8_i32, 1)

/* base_i32 with the output's fill (y .= 0) first, as Tessera's kernel runs it: the fill writes y
 * and the rows read it back. */
__attribute__((noinline)) static void fill_base_i32(double *restrict y) {
    memset(y, 0, 8 * n);
    base_i32(y);
}

typedef void (*F)(double *);

static int cmp(const void *a, const void *b) {
    double d = *(const double *)a - *(const double *)b;
    return (d > 0) - (d < 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.bin [REPEATS]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    I h[3];
    if (!f || fread(h, 8, 3, f) != 3) {
        fprintf(stderr, "%s: cannot read the header\n", argv[1]);
        return 1;
    }
    n = h[0], m = h[1], nnz = h[2];
    ptr = malloc(8 * (n + 1)), idx = malloc(8 * nnz), val = malloc(8 * nnz), x = malloc(8 * m);
    idx32 = malloc(4 * nnz);
    if (fread(ptr, 8, n + 1, f) != (size_t)(n + 1) || fread(idx, 8, nnz, f) != (size_t)nnz ||
        fread(val, 8, nnz, f) != (size_t)nnz || fread(x, 8, m, f) != (size_t)m) {
        fprintf(stderr, "%s: truncated\n", argv[1]);
        return 1;
    }
    fclose(f);
    for (I k = 0; k < nnz; k++) idx32[k] = (int32_t)idx[k];
    int reps = argc > 2 ? atoi(argv[2]) : 100;
    if (reps < 1 || reps > 10000) reps = 100;
    double *ref = calloc(n, 8), *y = malloc(8 * n), *t = malloc(sizeof(double) * reps);
    base(ref);
    sell_build();
    const char *names[] = {"base",     "base_i32",       "selblock2", "selblock4",
                           "flat2",    "avx8",           "avx8_zero_rule", "avx8_i32",
                           "fill_base_i32", "sell8",     "sell8_i32"};
    F fs[] = {base,     base_i32, selblock2,      selblock4, flat2, avx8,
              avx8_zero_rule, avx8_i32, fill_base_i32, sell8, sell8_i32};
    for (int v = 0; v < 11; v++) {
        for (int r = 0; r < reps + 5; r++) {
            memset(y, 0, 8 * n);
            double t0 = now();
            fs[v](y);
            if (r >= 5) t[r - 5] = now() - t0;
        }
        qsort(t, reps, sizeof(double), cmp);
        printf("%-15s min %.4f ms  median %.4f ms  %.2f ns/entry  bit-identical=%s\n", names[v],
               t[0] * 1e3, t[reps / 2] * 1e3, t[0] * 1e9 / nnz,
               memcmp(y, ref, 8 * n) == 0 ? "yes" : "NO");
    }
    return 0;
}

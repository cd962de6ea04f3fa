/* STREAM-like triad a[i] = b[i] + s * c[i] on one core, arrays far larger than the last-level
 * cache; prints the best of 10 runs as JSON {"triad_gbs": ..., "copy_gbs": ..., "bytes": ...}.
 * Counts 24 bytes per triad element (2 reads, 1 write) and 16 per copy element, as STREAM
 * does (write-allocate traffic not counted). Single-threaded because Tessera's kernels are.
 * Also a read-only sweep (not part of STREAM): the sum of one array's 64-bit words, the
 * ceiling of a kernel that mostly reads, such as SpMV (integers, so the sum vectorises). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N (1L << 25) /* 32 Mi doubles = 256 MiB per array */
#define REPS 10

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(void) {
    double *a = malloc(N * sizeof(double)), *b = malloc(N * sizeof(double)),
           *c = malloc(N * sizeof(double));
    if (!a || !b || !c) {
        fprintf(stderr, "stream: out of memory\n");
        return 1;
    }
    for (long i = 0; i < N; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.5;
    }
    double best_triad = 1e30, best_copy = 1e30, best_read = 1e30, s = 3.0;
    uint64_t sum = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (long i = 0; i < N; i++) a[i] = b[i] + s * c[i];
        double t1 = now();
        for (long i = 0; i < N; i++) c[i] = a[i];
        double t2 = now();
        const uint64_t *w = (const uint64_t *)b;
        for (long i = 0; i < N; i++) sum += w[i];
        double t3 = now();
        if (t1 - t0 < best_triad) best_triad = t1 - t0;
        if (t2 - t1 < best_copy) best_copy = t2 - t1;
        if (t3 - t2 < best_read) best_read = t3 - t2;
    }
    /* Use the results so the loops are not removed. */
    double check = a[N / 2] + c[N / 3] + (double)(sum & 1);
    printf("{\"triad_gbs\": %.3f, \"copy_gbs\": %.3f, \"read_gbs\": %.3f, \"bytes\": %ld, "
           "\"check\": %g}\n",
           24.0 * N / best_triad / 1e9, 16.0 * N / best_copy / 1e9, 8.0 * N / best_read / 1e9,
           3 * N * 8L, check);
    free(a);
    free(b);
    free(c);
    return 0;
}

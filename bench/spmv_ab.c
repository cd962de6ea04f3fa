/* A/B harness for SpMV kernels of the C backend (helper prefetch18, BENCHMARKS.md "Parallel SpMV",
   "Software prefetches of gathers"): dlopens several cached kernel objects (`tessera_kernel`
   of examples/spmv_row.tess, CSR), runs them alternately on one matrix in one process, checks
   their outputs bit-identical, prints min and median ms per kernel. Load varies less between
   neighbouring calls than between processes. Data: bench/spmv_ab_data.py.
     cc -O2 -o /tmp/spmv_ab bench/spmv_ab.c -ldl
     /tmp/spmv_ab DIR WIDTH(4|8) ROUNDS a.so b.so ...
   The view order (dims, A_ptr, A_idx, A_val, x_val, y_val) and dims (rows, cols, cols, rows,
   cols, nnz + 1) are those of `tessera code examples/spmv_row.tess` for CSR. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct { void *ptr; int64_t len; } view;
typedef int64_t (*kfn)(view *, void *, int64_t *);
static void *slurp(const char *dir, const char *name, int64_t *bytes) {
  char p[512]; snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb"); if (!f) { perror(p); exit(1); }
  fseek(f, 0, SEEK_END); *bytes = ftell(f); fseek(f, 0, SEEK_SET);
  void *b = aligned_alloc(64, (*bytes + 63) / 64 * 64); if (fread(b, 1, *bytes, f) != (size_t)*bytes) exit(2); fclose(f); return b;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  const char *dir = argv[1]; int w = atoi(argv[2]); int rounds = atoi(argv[3]); int nk = argc - 4;
  int64_t pb, ib, vb, xb; void *ptr = slurp(dir, "ptr.bin", &pb), *idx = slurp(dir, "idx.bin", &ib);
  double *val = slurp(dir, "val.bin", &vb), *x = slurp(dir, "x.bin", &xb);
  int64_t rows = pb / w - 1, nnz = vb / 8, cols = xb / 8;
  int64_t dims[6] = {rows, cols, cols, rows, cols, nnz + 1};
  double *y = malloc(rows * 8), *y0 = malloc(rows * 8);
  kfn k[16]; static void *helpers[64];
  for (int i = 0; i < nk; i++) {
    void *h = dlopen(argv[4 + i], RTLD_NOW | RTLD_LOCAL); if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    ((void (*)(void *))dlsym(h, "tessera_init"))(helpers); k[i] = (kfn)dlsym(h, "tessera_kernel");
  }
  double *t = malloc(sizeof(double) * nk * rounds);
  for (int r = -3; r < rounds; r++)
    for (int i = 0; i < nk; i++) {
      view v[6] = {{dims, 6}, {ptr, rows + 1}, {idx, nnz}, {val, nnz}, {x, cols}, {y, rows}};
      int64_t fault = 0; double t0 = now(); int64_t rc = k[i](v, NULL, &fault); double dt = now() - t0;
      if (rc) { fprintf(stderr, "kernel %d rc %ld\n", i, (long)rc); return 1; }
      if (r >= 0) t[i * rounds + r] = dt;
      if (i == 0 && r == -3) memcpy(y0, y, rows * 8); else if (memcmp(y0, y, rows * 8)) { fprintf(stderr, "kernel %d differs\n", i); return 1; }
    }
  for (int i = 0; i < nk; i++) { qsort(t + i * rounds, rounds, sizeof(double), cmp);
    printf("%-8s min %.3f med %.3f ms  %s\n", "", t[i * rounds], t[i * rounds + rounds / 2], strrchr(argv[4 + i], '/') ? strrchr(argv[4 + i], '/') + 1 : argv[4 + i]); }
  return 0;
}

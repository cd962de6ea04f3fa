// Eigen peer for the SpGEMM study: C = A B with row-major Eigen::SparseMatrix operands read
// from Matrix Market files; writes C's row pointers, column indices (int64) and values
// (float64) as raw files PREFIX.ptr, PREFIX.idx, PREFIX.val and prints
// {"median_ms": ..., "min_ms": ..., "nnz": ...} over REPEAT timed runs after WARMUP.
// Usage: eigen_spgemm A.mtx B.mtx PREFIX REPEAT WARMUP
#include <Eigen/Sparse>
#include <unsupported/Eigen/SparseExtra>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using Mat = Eigen::SparseMatrix<double, Eigen::RowMajor>;

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s A.mtx B.mtx PREFIX REPEAT WARMUP\n", argv[0]);
        return 2;
    }
    Mat a, b, c;
    if (!Eigen::loadMarket(a, argv[1]) || !Eigen::loadMarket(b, argv[2])) {
        std::fprintf(stderr, "cannot read %s or %s\n", argv[1], argv[2]);
        return 1;
    }
    a.makeCompressed();
    b.makeCompressed();
    int repeat = std::atoi(argv[4]), warmup = std::atoi(argv[5]);
    for (int r = 0; r < warmup; r++) c = a * b;
    std::vector<double> ms;
    for (int r = 0; r < repeat; r++) {
        auto t0 = std::chrono::steady_clock::now();
        c = a * b;
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    c.makeCompressed();
    std::sort(ms.begin(), ms.end());
    std::string prefix = argv[3];
    std::vector<int64_t> ptr(c.outerIndexPtr(), c.outerIndexPtr() + c.rows() + 1);
    std::vector<int64_t> idx(c.innerIndexPtr(), c.innerIndexPtr() + c.nonZeros());
    std::ofstream(prefix + ".ptr", std::ios::binary)
        .write(reinterpret_cast<const char*>(ptr.data()), sizeof(int64_t) * ptr.size());
    std::ofstream(prefix + ".idx", std::ios::binary)
        .write(reinterpret_cast<const char*>(idx.data()), sizeof(int64_t) * idx.size());
    std::ofstream(prefix + ".val", std::ios::binary)
        .write(reinterpret_cast<const char*>(c.valuePtr()), sizeof(double) * c.nonZeros());
    std::printf("{\"median_ms\": %.6f, \"min_ms\": %.6f, \"nnz\": %ld}\n", ms[ms.size() / 2], ms[0],
                (long)c.nonZeros());
    return 0;
}

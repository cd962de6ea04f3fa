// Eigen peer for the SpMV study: y = A x with A a row-major Eigen::SparseMatrix read from a
// Matrix Market file, x read from raw float64 (x.tofile()); writes y as raw float64 and prints
// {"median_ms": ..., "min_ms": ...} over REPEAT timed runs after WARMUP untimed ones.
// Usage: eigen_spmv A.mtx x.bin y.bin REPEAT WARMUP
#include <Eigen/Sparse>
#include <unsupported/Eigen/SparseExtra>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s A.mtx x.bin y.bin REPEAT WARMUP\n", argv[0]);
        return 2;
    }
    Eigen::SparseMatrix<double, Eigen::RowMajor> a;
    if (!Eigen::loadMarket(a, argv[1])) {
        std::fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }
    a.makeCompressed();
    Eigen::VectorXd x(a.cols());
    {
        std::ifstream f(argv[2], std::ios::binary);
        f.read(reinterpret_cast<char*>(x.data()), sizeof(double) * x.size());
        if (!f) {
            std::fprintf(stderr, "cannot read %ld doubles from %s\n", (long)x.size(), argv[2]);
            return 1;
        }
    }
    Eigen::VectorXd y(a.rows());
    int repeat = std::atoi(argv[4]), warmup = std::atoi(argv[5]);
    for (int r = 0; r < warmup; r++) y.noalias() = a * x;
    std::vector<double> ms;
    for (int r = 0; r < repeat; r++) {
        auto t0 = std::chrono::steady_clock::now();
        y.noalias() = a * x;
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::ofstream(argv[3], std::ios::binary)
        .write(reinterpret_cast<const char*>(y.data()), sizeof(double) * y.size());
    std::printf("{\"median_ms\": %.6f, \"min_ms\": %.6f}\n", ms[ms.size() / 2], ms[0]);
    return 0;
}

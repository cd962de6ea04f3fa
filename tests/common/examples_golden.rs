//! Reference values printed by scripts/examples_golden.py (numpy, scipy, Pillow).
//! Regenerate: /work/venv/bin/python scripts/examples_golden.py > tests/common/examples_golden.rs && cargo fmt

/// (matrix, checksum of A @ x) with x[k] = k % 7 - 3, for symmetric matrices.
pub const SYMMETRIC_SPMV: &[(&str, f64)] = &[
    ("494_bus", -152390.69897519995),
    ("1138_bus", -105104.96795369967),
    ("bcsstk10", 283380054.3781253),
    ("bcsstk13", 23189244291942.703),
];

/// (matrix, scipy.sparse.triu(A).sum()).
pub const TRIU_SUM: &[(&str, f64)] = &[
    ("494_bus", 112974.16159599999),
    ("west0067", -13.456641620000003),
    ("lp_afiro", 23.768),
    ("bcsstk10", 2645727637.4885454),
    ("Groebner_id2003_aug", 302013260.0),
];

/// (matrix, checksum of A.diagonal()).
pub const DIAGONAL: &[(&str, f64)] = &[
    ("494_bus", 665176.5175129998),
    ("west0067", 0.67424754),
    ("bcsstk10", 18998067715.584064),
    ("impcol_a", 1740.83411448),
];

/// The kernel of the 1-d convolution.
pub const CONV1_KERNEL: [f64; 5] = [1.0, -2.0, 0.5, 3.0, -1.0];
/// (matrix flattened row-major as the signal, checksum of numpy.convolve(a, CONV1_KERNEL)).
pub const CONVOLVE1D: &[(&str, f64)] = &[
    ("west0067", 132.18901846500003),
    ("impcol_a", 15662.487771527502),
];

/// The kernel of the 2-d convolution (3 x 3, row-major).
pub const CONV2_KERNEL: [f64; 9] = [1.0, 2.0, 0.0, -1.0, 0.5, 3.0, 0.25, 0.0, -2.0];
/// (matrix, checksum of scipy.signal.convolve2d(A, CONV2_KERNEL), full mode).
pub const CONVOLVE2D: &[(&str, f64)] = &[
    ("west0479", -15550789.464833502),
    ("lp_afiro", 331.0225),
    ("1138_bus", 12045.383872675797),
];

/// (image, threshold, [(true pixels, sum of their positions) of img > threshold, after one
/// erosion, after two]) with the 3 x 3 box and border value 1.
pub type ImageSums = [(i64, i64); 3];
pub const EROSION: &[(&str, u8, ImageSums)] = &[
    (
        "camera",
        128,
        [
            (167859, 19911247000),
            (143466, 14948949014),
            (125107, 11305276349),
        ],
    ),
    (
        "horse",
        128,
        [
            (87788, 6074998898),
            (85152, 5884299905),
            (82642, 5702537842),
        ],
    ),
    (
        "text",
        100,
        [
            (69864, 2729217546),
            (62526, 2495288913),
            (55292, 2258404666),
        ],
    ),
    (
        "microaneurysms",
        120,
        [(60, 423183), (20, 138659), (3, 21117)],
    ),
];

/// (image, threshold, numpy.bincount(img[img > threshold] // 16, minlength=16)).
pub const MASKED_HISTOGRAM: &[(&str, u8, [i64; 16])] = &[
    (
        "coins",
        100,
        [
            0, 0, 0, 0, 0, 0, 5773, 8622, 7413, 7602, 7637, 6212, 3517, 1502, 548, 38,
        ],
    ),
    (
        "camera",
        128,
        [
            0, 0, 0, 0, 0, 0, 0, 0, 18031, 38606, 24912, 7534, 47059, 27869, 2421, 1427,
        ],
    ),
    (
        "page",
        150,
        [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 3133, 6818, 6104, 5626, 9383, 17213, 876,
        ],
    ),
];

/// (graph, source, reached, depth, sum of level * (v % 13 + 1)): unweighted shortest paths.
pub const BFS: &[(&str, usize, i64, i64, i64)] = &[
    ("karate", 0, 34, 3, 371),
    ("karate", 33, 34, 4, 409),
    ("Erdos971", 0, 429, 8, 10895),
    ("Erdos971", 100, 1, 0, 0),
    ("Erdos971", 200, 429, 9, 11402),
    ("1138_bus", 0, 1138, 24, 102106),
    ("1138_bus", 500, 1138, 17, 63387),
    ("delaunay_n14", 0, 16384, 60, 3740685),
];

/// (graph, source, finite distances, sum of d * (v % 7 + 1)): Bellman-Ford on |weights|.
pub const BELLMAN_FORD: &[(&str, usize, i64, f64)] = &[
    ("1138_bus", 0, 1138, 2506285.9840321997),
    ("1138_bus", 700, 1138, 48590277.458742194),
    ("netscience", 0, 4, 9.5),
    ("netscience", 33, 379, 3759.9801860000002),
    ("bcsstk10", 5, 654, 15458155.737764673),
    ("Fashion_MNIST_norm_10NN", 0, 10000, 5945.90933901996),
];

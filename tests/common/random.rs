//! Random formats and data shared by the differential tests: the format lists every
//! generator draws from, and tensors with scattered entries or runs.

use rand::Rng;
use rand::rngs::StdRng;
use tessera::levels::Format;
use tessera::tensor::{Tensor, random_sparse};

use super::fmt;

pub const MATRIX_FORMATS: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
    "Dense(SparseList(Pattern()))",
    "Dense(SparseList(Element(1.0)))",
    "Dense(Dense(Element(0)))",
    "SparseList(SparseList(Element(0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(SparseCOO{1}(Element(0.0)))",
    "SparseCOO{2}(Pattern())",
    "Dense(SparseBand(Element(0.0)))",
    "Dense(SparseBlockList(Element(0.0)))",
    "Dense(SparsePoint(Element(0.0)))",
    "SparseBand(SparseList(Element(0.0)))",
    "SparseList(SparseBlockList(Element(1.0)))",
    "SparseBlockList(SparseBand(Element(0)))",
    "SparsePoint(Dense(Element(0.0)))",
    "SparseBand(SparsePoint(Element(0.0)))",
    "SparseBlockList(SparseCOO{1}(Pattern()))",
    "SparseList(SparseBand(Element(2.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "SparseByteMap(SparseList(Element(0.0)))",
    "SparseList(SparseByteMap(Element(1.0)))",
    "Dense(SparseDict(Element(0.0)))",
    "SparseDict(SparseDict(Element(0.0)))",
    "SparseDict(Dense(Element(2.0)))",
];

/// Run-length formats, added to the lists above for fresh cases (past failures are replayed
/// with the lists they were found with).
pub const RUN_MATRIX_FORMATS: &[&str] = &[
    "RunList(RunList(Element(0.0)))",
    "Dense(RunList(Element(0.0)))",
    "RunList(SparseList(Element(0.0)), merge=false)",
    "SparseList(SparseRunList(Element(0.0)))",
    "Dense(SparseRunList(Pattern()))",
    "SparseRunList(Dense(Element(0)), merge=false)",
];

pub const VECTOR_FORMATS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseList(Pattern())",
    "SparseList(Element(2.0))",
    "Dense(Element(0))",
    "SparseList(Element(0))",
    "SparseCOO{1}(Element(0.0))",
    "SparseBand(Element(0.0))",
    "SparseBlockList(Element(0.0))",
    "SparseBlockList(Pattern())",
    "SparsePoint(Element(0.0))",
    "SparsePoint(Pattern())",
    "SparseBand(Element(2.0))",
    "SparseByteMap(Element(0.0))",
    "SparseByteMap(Pattern())",
    "SparseDict(Element(0.0))",
    "SparseDict(Element(0))",
];

/// A random tensor for formats with SparsePoint levels, which hold one coordinate per
/// fiber: the first entry of each fiber is kept.
pub fn point_tensor(f: &Format, shape: &[usize], density: f64, seed: u64) -> Tensor {
    let text = f.to_string();
    let loose = fmt(&text.replace("SparsePoint", "SparseList"));
    let t = random_sparse(&loose, shape, density, seed).expect("random tensor");
    // The dimensions a SparsePoint level indexes, found by level rank.
    let mut point_dims = vec![];
    let mut d = 0;
    for l in &f.levels {
        if *l == tessera::levels::LevelKind::SparsePoint {
            point_dims.push(d);
        }
        d += l.rank();
    }
    let mut chosen: std::collections::HashMap<(usize, Vec<usize>), usize> = Default::default();
    let mut coords = vec![vec![]; shape.len()];
    let mut vals = tessera::runtime::Buffer::new(f.elem());
    t.for_each_stored(&mut |c, v| {
        let fits = point_dims
            .iter()
            .all(|&d| *chosen.entry((d, c[..d].to_vec())).or_insert(c[d]) == c[d]);
        if fits {
            for (k, &x) in c.iter().enumerate() {
                coords[k].push(x as i64);
            }
            vals.push(v);
        }
    });
    Tensor::from_coo(f, shape, &coords, &vals, |a, _| a).expect("random tensor")
}

/// Scattered entries at the given density (any format).
pub fn scattered(f: &Format, shape: &[usize], density: f64, seed: u64) -> Tensor {
    if f.to_string().contains("SparsePoint") {
        return point_tensor(f, shape, density, seed);
    }
    random_sparse(f, shape, density, seed).expect("random tensor")
}

pub const RUN_VECTOR_FORMATS: &[&str] = &[
    "RunList(Element(0.0))",
    "RunList(Element(0), merge=false)",
    "SparseRunList(Element(0.0))",
    "SparseRunList(Pattern(), merge=false)",
];

/// Random data for a format: scattered entries (`random_sparse`) or, half the time, runs of
/// equal values along the last dimension (rows repeating now and then), which is what the
/// run-length formats are for.
pub fn random_tensor(rng: &mut StdRng, f: &Format, shape: &[usize]) -> Tensor {
    if rng.random_bool(0.5) || f.to_string().contains("SparsePoint") {
        let density = rng.random_range(0.0..1.0);
        return scattered(f, shape, density, rng.random());
    }
    let total: usize = shape.iter().product();
    let row = shape.last().copied().unwrap_or(1).max(1);
    let change = rng.random_range(0.1..0.7);
    let mut values: Vec<f64> = Vec::with_capacity(total);
    let mut v = 0.0;
    while values.len() < total {
        let k = values.len();
        if k >= row && k.is_multiple_of(row) && rng.random_bool(0.3) {
            // Repeat the previous row.
            for c in 0..row {
                values.push(values[k - row + c]);
            }
            continue;
        }
        if rng.random_bool(change) {
            v = *pick(rng, &[0.0, 0.0, 1.0, 2.0, 3.0]);
        }
        values.push(v);
    }
    Tensor::from_dense(f, shape, &tessera::runtime::Buffer::F64(values)).expect("runny tensor")
}

/// Every format of `rank` dimensions (0 to 2) the level registry builds over an `f64`, an
/// `i64` or a Pattern leaf (each registered level in each parameter variant, at each place of
/// the chain), keeping those whose levels hold any data so that random data fits. A newly
/// registered level joins the generators through its registry line alone.
pub fn registry_formats(rank: usize) -> Vec<&'static str> {
    use std::sync::OnceLock;
    use tessera::levels::LevelKind;
    use tessera::levels::registry::example_formats;
    use tessera::types::Scalar;
    static BY_RANK: [OnceLock<Vec<String>>; 3] = [const { OnceLock::new() }; 3];
    let leaves = [
        LevelKind::Element(Scalar::F64(0.0)),
        LevelKind::Element(Scalar::I64(0)),
        LevelKind::Pattern,
    ];
    BY_RANK[rank]
        .get_or_init(|| {
            example_formats(rank, &leaves)
                .iter()
                .filter(|f| f.levels.iter().all(|l| l.caps().holds_any))
                .map(|f| f.to_string())
                .collect()
        })
        .iter()
        .map(String::as_str)
        .collect()
}

pub fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

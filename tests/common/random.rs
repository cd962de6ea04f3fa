//! Random formats and data shared by the differential tests: the formats every generator
//! draws from (the level registry's, and listed ones it does not build), and tensors with
//! scattered entries or runs (as proptest strategies, so a failing case shrinks to few, small
//! values; `random_tensor` draws the same kinds of data from a seeded generator).

use proptest::prelude::*;
use proptest::sample::select;
use rand::Rng;
use rand::rngs::StdRng;
use std::collections::HashMap;
use tessera::levels::{Format, LevelKind};
use tessera::runtime::Buffer;
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

/// Run-length formats (kept apart from the lists above for tests that read only those).
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
        if matches!(l, tessera::levels::LevelKind::SparsePoint { .. }) {
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

/// Every matrix format the generators draw from: the registry's (`registry_formats`), then
/// the listed ones it does not build (non-zero fills, SparsePoint levels, which hold one entry
/// per fiber).
pub fn all_matrix_formats() -> Vec<&'static str> {
    registry_and(2, &[MATRIX_FORMATS, RUN_MATRIX_FORMATS])
}

/// Every vector format the generators draw from, as `all_matrix_formats`.
pub fn all_vector_formats() -> Vec<&'static str> {
    registry_and(1, &[VECTOR_FORMATS, RUN_VECTOR_FORMATS])
}

/// The registry's formats of `rank` dimensions, then those of `listed` not among them.
fn registry_and(rank: usize, listed: &[&[&'static str]]) -> Vec<&'static str> {
    let mut out = registry_formats(rank);
    for &f in listed.concat().iter() {
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

/// Row-major values for one tensor, drawn before its shape is known (so that shrinking the
/// shape keeps the values): the first `shape.iter().product()` are used.
#[derive(Clone, Debug)]
pub enum Data {
    /// Entries 1..=9 where `Some`, the format's fill elsewhere (what `random_sparse` gives).
    Scattered(Vec<Option<u8>>),
    /// Runs of equal values along the last dimension, which is what the run-length formats
    /// are for: each `Some(v)` starts a run of `v`, starting from 0; a row whose flag is set
    /// repeats the row before it.
    Runs {
        starts: Vec<Option<u8>>,
        repeat_row: Vec<bool>,
    },
}

/// `Data` for tensors of up to `max_len` entries: scattered entries at a few densities (from
/// nearly empty to nearly full) half the time, runs the other half. Everything shrinks towards
/// fewer entries and shorter runs of zero.
pub fn data_s(max_len: usize) -> impl Strategy<Value = Data> {
    let scattered = |density: f64| {
        proptest::collection::vec(proptest::option::weighted(density, 1u8..=9), max_len)
            .prop_map(Data::Scattered)
    };
    let runs = move |change: f64| {
        (
            proptest::collection::vec(
                proptest::option::weighted(change, select(&[0u8, 0, 1, 2, 3][..])),
                max_len,
            ),
            proptest::collection::vec(proptest::bool::weighted(0.3), max_len),
        )
            .prop_map(|(starts, repeat_row)| Data::Runs { starts, repeat_row })
    };
    prop_oneof![
        1 => scattered(0.1),
        1 => scattered(0.3),
        1 => scattered(0.6),
        1 => scattered(0.9),
        2 => runs(0.2),
        2 => runs(0.6),
    ]
}

impl Data {
    /// The row-major values of a tensor of `shape` whose background is `fill`.
    pub fn values(&self, shape: &[usize], fill: f64) -> Vec<f64> {
        let total: usize = shape.iter().product();
        let drawn = match self {
            Data::Scattered(xs) => xs.len(),
            Data::Runs { starts, .. } => starts.len(),
        };
        assert!(total <= drawn, "{drawn} values drawn for shape {shape:?}");
        match self {
            Data::Scattered(xs) => (0..total).map(|k| xs[k].map_or(fill, f64::from)).collect(),
            Data::Runs { starts, repeat_row } => {
                let row = shape.last().copied().unwrap_or(1).max(1);
                let mut values: Vec<f64> = Vec::with_capacity(total);
                let mut v = 0.0;
                while values.len() < total {
                    let k = values.len();
                    if k >= row && k.is_multiple_of(row) && repeat_row[k / row] {
                        for c in 0..row {
                            values.push(values[k - row + c]);
                        }
                        continue;
                    }
                    if let Some(x) = starts[k] {
                        v = f64::from(x);
                    }
                    values.push(v);
                }
                values
            }
        }
    }

    /// A tensor of format `f` and `shape` holding these values (for a format with SparsePoint
    /// levels, the first entry of each fiber only).
    pub fn tensor(&self, f: &Format, shape: &[usize]) -> Tensor {
        let fill = f.fill().as_f64();
        let mut values = self.values(shape, fill);
        keep_one_per_point_fiber(f, shape, &mut values, fill);
        Tensor::from_dense(f, shape, &Buffer::F64(values.into()))
            .unwrap_or_else(|e| panic!("a {f} tensor of shape {shape:?}: {e}"))
    }
}

/// SparsePoint levels hold one coordinate per fiber: entries after the first of each fiber
/// become the fill.
fn keep_one_per_point_fiber(f: &Format, shape: &[usize], values: &mut [f64], fill: f64) {
    // The dimensions a SparsePoint level indexes, found by level rank.
    let mut point_dims = vec![];
    let mut d = 0;
    for l in &f.levels {
        if matches!(l, LevelKind::SparsePoint { .. }) {
            point_dims.push(d);
        }
        d += l.rank();
    }
    if point_dims.is_empty() {
        return;
    }
    let mut chosen: HashMap<(usize, Vec<usize>), usize> = HashMap::new();
    for (k, v) in values.iter_mut().enumerate() {
        if *v == fill {
            continue;
        }
        let mut c = vec![0; shape.len()];
        let mut r = k;
        for d in (0..shape.len()).rev() {
            c[d] = r % shape[d];
            r /= shape[d];
        }
        let fits = point_dims
            .iter()
            .all(|&d| *chosen.entry((d, c[..d].to_vec())).or_insert(c[d]) == c[d]);
        if !fits {
            *v = fill;
        }
    }
}

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
    Tensor::from_dense(f, shape, &tessera::runtime::Buffer::F64(values.into()))
        .expect("runny tensor")
}

/// Every format of `rank` dimensions (0 to 2) the level registry builds over an `f64`, an
/// `i64` or a Pattern leaf (each registered level in each parameter variant, at each place of
/// the chain), keeping those whose levels hold any data so that random data fits. A newly
/// registered level joins the generators through its registry line alone.
pub fn registry_formats(rank: usize) -> Vec<&'static str> {
    use std::sync::OnceLock;
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

//! The example programs of `examples/` on real data (`../shared/data`), against reference
//! values computed with numpy / scipy / Pillow by `scripts/examples_golden.py`, and against the
//! reference evaluator on small inputs. The graph kernels are driven the way
//! `examples/bfs.rs` shows (that file's driver is the one tested here).

#[path = "../examples/bellman_ford.rs"]
#[allow(dead_code)]
mod bellman_ford;
#[path = "../examples/bfs.rs"]
#[allow(dead_code)]
mod bfs;
mod common;
#[path = "common/examples_golden.rs"]
mod golden;

use bfs::{Bfs, Direction};
use common::{data_dir, fmt, parse};
use std::collections::BTreeMap;
use std::path::Path;
use tessera::algorithms::bellman_ford::{IMPROVED, ROUND_OWNED, ROUND_PARALLEL};
use tessera::algorithms::owners::Owners;
use tessera::levels::{Format, LevelKind};
use tessera::notation::ast::Program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::files::load_tensor;
use tessera::types::Scalar;

const SYMMETRIC_SPMV: &str = include_str!("../examples/symmetric_spmv.tess");
const SPLIT_SYMMETRIC: &str = include_str!("../examples/split_symmetric.tess");
const TRIU_SUM: &str = include_str!("../examples/triu_sum.tess");
const DIAGONAL: &str = include_str!("../examples/diagonal.tess");
const CONVOLVE1D: &str = include_str!("../examples/convolve1d.tess");
const CONVOLVE2D: &str = include_str!("../examples/convolve2d.tess");
const THRESHOLD: &str = include_str!("../examples/threshold.tess");
const EROSION: &str = include_str!("../examples/erosion.tess");
const MASKED_HISTOGRAM: &str = include_str!("../examples/masked_histogram.tess");
const EROSION_WORDS: &str = include_str!("../examples/erosion_words.tess");
const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

const CSR: &str = "Dense(SparseList(Element(0.0)))";
const DCSR: &str = "SparseList(SparseList(Element(0.0)))";
const DENSE_VEC: &str = "Dense(Element(0.0))";

/// One JIT runner per test, so each program compiles once per format combination.
struct Kernels {
    runner: Runner,
}

impl Kernels {
    fn new() -> Kernels {
        Kernels {
            runner: Runner::jit(),
        }
    }

    fn run(&self, text: &str, ts: &mut BTreeMap<String, Tensor>) {
        let p = parse(text);
        let formats = common::formats_of(ts);
        let c = self.runner.compile(&p, &formats).unwrap_or_else(|e| {
            let list: Vec<String> = formats.iter().map(|(n, f)| format!("{n}: {f}")).collect();
            panic!("{e}\nformats: {}\n{text}", list.join(", "))
        });
        self.runner
            .execute(&c, ts)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        for (n, t) in ts.iter() {
            t.validate(n).unwrap_or_else(|e| panic!("{e}\n{text}"));
        }
    }
}

fn tensors(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

fn empty(format: &str, shape: &[usize]) -> Tensor {
    Tensor::empty(&fmt(format), shape).unwrap()
}

fn scalar_input(v: Scalar) -> Tensor {
    Tensor::empty(&Format::new(vec![LevelKind::Element(v)]).unwrap(), &[]).unwrap()
}

fn matrix(dir: &Path, name: &str, format: &str) -> Tensor {
    let path = dir.join(format!("matrices/{name}.mtx"));
    load_tensor(path.to_str().unwrap(), Some(format)).unwrap_or_else(|e| panic!("{e}"))
}

fn f64s(t: &Tensor) -> Vec<f64> {
    match t.to_dense() {
        Buffer::F64(v) => v.into_vec(),
        other => panic!("expected f64 values, got {:?}", other.elem()),
    }
}

fn i64s(t: &Tensor) -> Vec<i64> {
    match t.to_dense() {
        Buffer::I64(v) => v.into_vec(),
        other => panic!("expected i64 values, got {:?}", other.elem()),
    }
}

fn bools(t: &Tensor) -> Vec<bool> {
    match t.to_dense() {
        Buffer::Bool(v) => v.into_vec(),
        other => panic!("expected bool values, got {:?}", other.elem()),
    }
}

/// `sum_k v[k] * (k % 5 + 1)`, as in scripts/examples_golden.py.
fn checksum(v: &[f64]) -> f64 {
    v.iter()
        .enumerate()
        .map(|(k, x)| x * ((k % 5) as f64 + 1.0))
        .sum()
}

fn assert_close(got: f64, want: f64, what: &str) {
    let tol = 1e-9 * want.abs().max(1.0);
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} (difference {})",
        got - want
    );
}

fn spmv_x(n: usize) -> Tensor {
    let x: Vec<f64> = (0..n).map(|k| (k % 7) as f64 - 3.0).collect();
    Tensor::from_dense(&fmt(DENSE_VEC), &[n], &Buffer::F64(x.into())).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Sparse linear algebra

#[test]
fn symmetric_spmv_equals_the_full_product() {
    let Some(dir) = data_dir("symmetric_spmv_equals_the_full_product") else {
        return;
    };
    let k = Kernels::new();
    for (idx, &(name, want)) in golden::SYMMETRIC_SPMV.iter().enumerate() {
        let a = matrix(&dir, name, CSR);
        let n = a.shape[0];
        // The upper format also runs as DCSR on the first matrix.
        let formats: &[&str] = if idx == 0 { &[CSR, DCSR] } else { &[CSR] };
        for &uf in formats {
            let mut split = tensors(vec![
                ("A", a.clone()),
                ("U", empty(uf, &[n, n])),
                ("D", empty(DENSE_VEC, &[n])),
            ]);
            k.run(SPLIT_SYMMETRIC, &mut split);
            split["U"].for_each_stored(&mut |c, _| {
                assert!(c[0] < c[1], "{name}: U stores ({}, {})", c[0], c[1])
            });
            let mut ts = tensors(vec![
                ("U", split.remove("U").unwrap()),
                ("D", split.remove("D").unwrap()),
                ("x", spmv_x(n)),
                ("y", empty(DENSE_VEC, &[n])),
                ("y_i", empty("Scalar(0.0)", &[])),
            ]);
            k.run(SYMMETRIC_SPMV, &mut ts);
            let y = f64s(&ts["y"]);
            assert_close(checksum(&y), want, &format!("{name} as {uf}"));
            // Position by position against the plain SpMV on the whole matrix.
            let mut full = tensors(vec![
                ("A", a.clone()),
                ("x", spmv_x(n)),
                ("y", empty(DENSE_VEC, &[n])),
            ]);
            k.run(SPMV, &mut full);
            for (i, (g, w)) in y.iter().zip(f64s(&full["y"])).enumerate() {
                assert_close(*g, w, &format!("{name}: y[{i}]"));
            }
        }
    }
}

#[test]
fn triu_sum_matches_scipy() {
    let Some(dir) = data_dir("triu_sum_matches_scipy") else {
        return;
    };
    let k = Kernels::new();
    for &(name, want) in golden::TRIU_SUM {
        for f in [CSR, DCSR] {
            let mut ts = tensors(vec![
                ("A", matrix(&dir, name, f)),
                ("s", empty("Scalar(0.0)", &[])),
            ]);
            k.run(TRIU_SUM, &mut ts);
            let s = ts["s"].get(&[]).unwrap().as_f64();
            assert_close(s, want, &format!("{name} as {f}"));
        }
    }
}

#[test]
fn diagonal_matches_scipy() {
    let Some(dir) = data_dir("diagonal_matches_scipy") else {
        return;
    };
    let k = Kernels::new();
    for &(name, want) in golden::DIAGONAL {
        for f in [CSR, DCSR] {
            let a = matrix(&dir, name, f);
            let n = a.shape[0];
            let mut ts = tensors(vec![("A", a), ("d", empty(DENSE_VEC, &[n]))]);
            k.run(DIAGONAL, &mut ts);
            assert_close(checksum(&f64s(&ts["d"])), want, &format!("{name} as {f}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Convolutions

#[test]
fn convolve1d_matches_numpy() {
    let Some(dir) = data_dir("convolve1d_matches_numpy") else {
        return;
    };
    let k = Kernels::new();
    let kernel = golden::CONV1_KERNEL.to_vec();
    let m = kernel.len();
    for &(name, want) in golden::CONVOLVE1D {
        // The signal: the matrix flattened row-major, a long sparse vector.
        let a = matrix(&dir, name, CSR);
        let cols = a.shape[1];
        let len = a.shape[0] * cols;
        let (mut idx, mut vals) = (vec![], vec![]);
        a.for_each_stored(&mut |c, v| {
            idx.push((c[0] * cols + c[1]) as i64);
            vals.push(v.as_f64());
        });
        for f in ["SparseList(Element(0.0))", DENSE_VEC] {
            let signal = Tensor::from_coo(
                &fmt(f),
                &[len],
                &[idx.clone()],
                &Buffer::F64(vals.clone().into()),
                |x, _| x,
            )
            .unwrap();
            let mut ts = tensors(vec![
                ("a", signal),
                (
                    "v",
                    Tensor::from_dense(&fmt(DENSE_VEC), &[m], &Buffer::F64(kernel.clone().into()))
                        .unwrap(),
                ),
                ("y", empty(DENSE_VEC, &[len + m - 1])),
            ]);
            k.run(CONVOLVE1D, &mut ts);
            assert_close(checksum(&f64s(&ts["y"])), want, &format!("{name} as {f}"));
        }
    }
}

#[test]
fn convolve2d_matches_scipy() {
    let Some(dir) = data_dir("convolve2d_matches_scipy") else {
        return;
    };
    let k = Kernels::new();
    let kernel = Tensor::from_dense(
        &fmt("Dense(Dense(Element(0.0)))"),
        &[3, 3],
        &Buffer::F64(golden::CONV2_KERNEL.to_vec().into()),
    )
    .unwrap();
    for &(name, want) in golden::CONVOLVE2D {
        let a = matrix(&dir, name, CSR);
        let (m, n) = (a.shape[0], a.shape[1]);
        let mut ts = tensors(vec![
            ("A", a),
            ("K", kernel.clone()),
            ("C", empty("Dense(Dense(Element(0.0)))", &[m + 2, n + 2])),
        ]);
        k.run(CONVOLVE2D, &mut ts);
        assert_close(checksum(&f64s(&ts["C"])), want, name);
    }
}

// ---------------------------------------------------------------------------------------------
// Images

/// The bool formats the image programs run on, with the row workspace each uses for erosion
/// (Finch's configuration last: a run-length workspace under a run-length image).
const IMAGE_FORMATS: &[(&str, &str)] = &[
    ("Dense(Dense(Element(false)))", "Dense(Element(false))"),
    ("Dense(SparseRunList(Pattern()))", "Dense(Element(false))"),
    (
        "Dense(RunList(Element(false)))",
        "RunList(Element(false), merge=false)",
    ),
    (
        "Dense(SparseRunList(Pattern()))",
        "SparseRunList(Pattern(), merge=false)",
    ),
];

fn image(dir: &Path, name: &str) -> Tensor {
    let path = dir.join(format!("images/{name}.png"));
    load_tensor(path.to_str().unwrap(), Some("Dense(Dense(Element(0x00)))"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `img > t` through threshold.tess, stored in `format`.
fn threshold(k: &Kernels, img: &Tensor, t: u8, format: &str) -> Tensor {
    let mut ts = tensors(vec![
        ("img", img.clone()),
        ("T", scalar_input(Scalar::I64(t as i64))),
        ("mask", empty(format, &img.shape)),
    ]);
    k.run(THRESHOLD, &mut ts);
    ts.remove("mask").unwrap()
}

/// (true pixels, sum of their row-major positions), as in scripts/examples_golden.py.
fn image_sum(t: &Tensor) -> (i64, i64) {
    let w = t.shape[1];
    bools(t)
        .iter()
        .enumerate()
        .filter(|(_, b)| **b)
        .fold((0, 0), |(c, s), (k, _)| {
            debug_assert!(k / w < t.shape[0]);
            (c + 1, s + k as i64)
        })
}

#[test]
fn erosion_matches_scipy_in_every_format() {
    let Some(dir) = data_dir("erosion_matches_scipy_in_every_format") else {
        return;
    };
    let k = Kernels::new();
    for &(name, t, want) in golden::EROSION {
        let img = image(&dir, name);
        let mut results: Vec<Vec<bool>> = vec![];
        for &(f, tmp) in IMAGE_FORMATS {
            let mut cur = threshold(&k, &img, t, f);
            assert_eq!(image_sum(&cur), want[0], "{name} > {t} as {f}");
            // Two iterations: the output of one erosion is the input of the next.
            for (step, &w) in want[1..].iter().enumerate() {
                let mut ts = tensors(vec![
                    ("input", cur),
                    ("output", empty(f, &img.shape)),
                    ("tmp", empty(tmp, &img.shape[1..])),
                ]);
                k.run(EROSION, &mut ts);
                cur = ts.remove("output").unwrap();
                assert_eq!(image_sum(&cur), w, "{name}: erosion {} as {f}", step + 1);
            }
            results.push(bools(&cur));
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]), "{name}");
    }
}

/// Finch's erosion keeps the row workspace run-length too, declared inside the row loop. On
/// images of one or two rows or columns the edge phases of the permissive accesses (at most
/// one coordinate each) meet or vanish.
#[test]
fn erosion_with_a_run_length_row_workspace() {
    let k = Kernels::new();
    let f = "Dense(SparseRunList(Pattern()))";
    for (seed, &(h, w)) in [(12, 20), (1, 6), (6, 1), (2, 2), (1, 1), (3, 2)]
        .iter()
        .enumerate()
    {
        let img = small_image(h, w, 7 + seed as u64);
        let mask = k.agree(
            THRESHOLD,
            tensors(vec![
                ("img", img),
                ("T", scalar_input(Scalar::I64(60))),
                ("mask", empty(f, &[h, w])),
            ]),
        );
        for tmp in [
            "SparseRunList(Pattern(), merge=false)",
            "SparseRunList(Pattern())",
            "RunList(Element(false), merge=false)",
        ] {
            k.agree(
                EROSION,
                tensors(vec![
                    ("input", mask["mask"].clone()),
                    ("output", empty(f, &[h, w])),
                    ("tmp", empty(tmp, &[w])),
                ]),
            );
        }
    }
}

#[test]
fn masked_histogram_matches_numpy() {
    let Some(dir) = data_dir("masked_histogram_matches_numpy") else {
        return;
    };
    let k = Kernels::new();
    for &(name, t, want) in golden::MASKED_HISTOGRAM {
        let img = image(&dir, name);
        for &(f, _) in IMAGE_FORMATS {
            let mut ts = tensors(vec![
                ("img", img.clone()),
                ("mask", threshold(&k, &img, t, f)),
                ("bins", empty("Dense(Element(0))", &[16])),
            ]);
            k.run(MASKED_HISTOGRAM, &mut ts);
            assert_eq!(
                i64s(&ts["bins"]),
                want.to_vec(),
                "{name} > {t}, mask as {f}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Graphs

/// The stored edges of a square matrix: (from, to, weight).
fn edges(a: &Tensor) -> Vec<(usize, usize, f64)> {
    let mut out = vec![];
    a.for_each_stored(&mut |c, v| out.push((c[0], c[1], v.as_f64())));
    out
}

/// A certificate that `level` holds BFS levels from `source` and `parent` a BFS tree: the
/// source is the root at level 0; every other reached vertex's parent is an in-neighbour one
/// level closer; no edge leaves a reached vertex for an unreached one or skips a level.
fn check_bfs_tree(name: &str, source: usize, a: &Tensor, s: &bfs::Search) {
    let (level, parent) = (&s.level, &s.parent);
    assert_eq!(
        (level[source], parent[source]),
        (0, source as i64),
        "{name}"
    );
    let adj: std::collections::HashSet<(usize, usize)> =
        edges(a).into_iter().map(|(j, k, _)| (j, k)).collect();
    for v in 0..level.len() {
        if level[v] < 0 {
            assert_eq!(parent[v], -1, "{name}: unreached {v} has a parent");
        } else if v != source {
            let p = parent[v];
            assert!(p >= 0, "{name}: reached {v} has no parent");
            let p = p as usize;
            assert!(
                adj.contains(&(p, v)),
                "{name}: parent {p} of {v} is no neighbour"
            );
            assert_eq!(level[p], level[v] - 1, "{name}: parent {p} of {v}");
        }
    }
    for &(j, k) in &adj {
        if level[j] >= 0 {
            assert!(
                level[k] >= 0 && level[k] <= level[j] + 1,
                "{name}: edge {j} -> {k} breaks the levels"
            );
        }
    }
}

#[test]
fn bfs_levels_match_scipy_in_every_direction() {
    let Some(dir) = data_dir("bfs_levels_match_scipy_in_every_direction") else {
        return;
    };
    let b = Bfs::default();
    let mut graph: Option<(&str, Tensor)> = None;
    for &(name, source, reached, depth, weighted) in golden::BFS {
        if graph.as_ref().is_none_or(|(g, _)| *g != name) {
            graph = Some((name, matrix(&dir, name, bfs::GRAPH_FORMAT)));
        }
        let a = &graph.as_ref().unwrap().1;
        let mut levels = vec![];
        for d in [Direction::Push, Direction::Pull, Direction::Auto] {
            // The graphs are symmetric: in-edges are out-edges.
            let s = b.search(a, a, source, d).unwrap();
            check_bfs_tree(name, source, a, &s);
            let got_reached = s.level.iter().filter(|&&l| l >= 0).count() as i64;
            let got_weighted: i64 = s
                .level
                .iter()
                .enumerate()
                .filter(|(_, l)| **l >= 0)
                .map(|(v, l)| l * ((v % 13) as i64 + 1))
                .sum();
            let got_depth = *s.level.iter().max().unwrap();
            assert_eq!(
                (got_reached, got_depth, got_weighted),
                (reached, depth, weighted),
                "{name} from {source}, {d:?}"
            );
            assert!(
                s.steps
                    .iter()
                    .all(|(sd, _)| d == Direction::Auto || *sd == d)
            );
            levels.push(s.level);
        }
        assert!(levels.windows(2).all(|w| w[0] == w[1]), "{name}");
    }
}

#[test]
fn direction_optimizing_bfs_switches_directions() {
    let Some(dir) = data_dir("direction_optimizing_bfs_switches_directions") else {
        return;
    };
    // Beamer's rule with the pull step's sweep of the vertices, recomputed from the levels:
    // step k expands level k. The small-world graph pulls its large middle levels; the mesh's
    // levels never pay for a sweep of every vertex, so it only pushes.
    for (name, source, pulls) in [("delaunay_n14", 0, false), ("ca-HepPh", 0, true)] {
        let a = matrix(&dir, name, bfs::GRAPH_FORMAT);
        let s = Bfs::default()
            .search(&a, &a, source, Direction::Auto)
            .unwrap();
        let n = a.shape[0];
        let mut degree = vec![0i64; n];
        for (j, _, _) in edges(&a) {
            degree[j] += 1;
        }
        let total: i64 = degree.iter().sum();
        let edges_at =
            |k: i64| -> i64 { (0..n).filter(|&v| s.level[v] == k).map(|v| degree[v]).sum() };
        let (mut previous, mut last, mut explored) = (Direction::Push, 0, 0);
        for (k, &(d, size)) in s.steps.iter().enumerate() {
            let frontier_edges = edges_at(k as i64);
            explored += frontier_edges;
            let unexplored = total - explored;
            let sweep = n as f64 / bfs::GAMMA;
            let want = match previous {
                Direction::Pull if size < last && (size as f64) < n as f64 / bfs::BETA => {
                    Direction::Push
                }
                Direction::Pull if (frontier_edges as f64) < sweep => Direction::Push,
                Direction::Pull => Direction::Pull,
                _ if frontier_edges as f64 > unexplored as f64 / bfs::ALPHA + sweep => {
                    Direction::Pull
                }
                _ => Direction::Push,
            };
            assert_eq!(d, want, "{name}: step {k}, frontier {size}");
            (previous, last) = (d, size);
        }
        assert!(s.steps.iter().any(|(d, _)| *d == Direction::Push), "{name}");
        let pulled = s.steps.iter().any(|(d, _)| *d == Direction::Pull);
        assert_eq!(pulled, pulls, "{name}");
    }
}

#[test]
fn bellman_ford_reports_negative_cycles_and_bad_graphs() {
    let k = Kernels::new();
    // 0 -> 1 -> 0 weighs -2 in total.
    let a = Tensor::from_coo(
        &fmt(bellman_ford::WEIGHTS),
        &[3, 3],
        &[vec![0, 1, 1], vec![1, 0, 2]],
        &Buffer::F64(vec![-1.0, -1.0, 4.0].into()),
        |x, _| x,
    )
    .unwrap();
    assert!(matches!(
        bellman_ford::shortest_paths(&k.runner, &a, 0),
        Err(tessera::Error::Tensor { .. })
    ));
    // The same graph with |weights|: 0 -> 1 -> 2.
    let p = bellman_ford::shortest_paths(&k.runner, &bellman_ford::absolute(a), 0).unwrap();
    assert_eq!(p.dist, vec![0.0, 1.0, 5.0]);
    let rect = empty(bellman_ford::WEIGHTS, &[2, 3]);
    assert!(bellman_ford::shortest_paths(&k.runner, &rect, 0).is_err());
    let sq = empty(bellman_ford::WEIGHTS, &[2, 2]);
    assert!(bellman_ford::shortest_paths(&k.runner, &sq, 2).is_err());
}

#[test]
fn bfs_rejects_bad_graphs_and_sources() {
    let b = Bfs::default();
    let rect = empty("Dense(SparseList(Pattern()))", &[3, 4]);
    assert!(matches!(
        b.search(&rect, &rect, 0, Direction::Push),
        Err(tessera::Error::Tensor { .. })
    ));
    let sq = empty("Dense(SparseList(Pattern()))", &[3, 3]);
    assert!(matches!(
        b.search(&sq, &sq, 3, Direction::Push),
        Err(tessera::Error::Tensor { .. })
    ));
    // A graph without edges: only the source is reached.
    let s = b.search(&sq, &sq, 1, Direction::Auto).unwrap();
    assert_eq!(s.level, vec![-1, 0, -1]);
    assert_eq!(s.parent, vec![-1, 1, -1]);
}

const FRONTIER: &str = "SparseByteMap(Pattern())";
const DIST: &str = "Dense(Element(Inf))";

#[test]
fn bellman_ford_matches_scipy() {
    let Some(dir) = data_dir("bellman_ford_matches_scipy") else {
        return;
    };
    let k = Kernels::new();
    for &(name, source, finite, weighted) in golden::BELLMAN_FORD {
        let a = bellman_ford::absolute(matrix(&dir, name, bellman_ford::WEIGHTS));
        let paths = bellman_ford::shortest_paths(&k.runner, &a, source).unwrap();
        let d = paths.dist;
        let got_finite = d.iter().filter(|x| x.is_finite()).count() as i64;
        let got_weighted: f64 = d
            .iter()
            .enumerate()
            .filter(|(_, x)| x.is_finite())
            .map(|(v, x)| x * ((v % 7) as f64 + 1.0))
            .sum();
        assert_eq!(got_finite, finite, "{name} from {source}");
        assert_close(got_weighted, weighted, &format!("{name} from {source}"));
        // A certificate: no edge can shorten a distance, and every reached vertex but the
        // source has a predecessor on a shortest path (an edge that is tight).
        assert_eq!(d[source], 0.0);
        let mut tight = vec![false; d.len()];
        for (j, i, w) in edges(&a) {
            assert!(d[i] <= d[j] + w, "{name}: edge {j} -> {i} is not relaxed");
            if d[j].is_finite() && d[j] + w == d[i] {
                tight[i] = true;
            }
        }
        for v in 0..d.len() {
            assert!(
                v == source || !d[v].is_finite() || tight[v],
                "{name}: {v} has no predecessor"
            );
        }
        // The driver's predecessors are such tight edges.
        let weight: std::collections::HashMap<(usize, usize), f64> =
            edges(&a).into_iter().map(|(j, i, w)| ((j, i), w)).collect();
        assert_eq!(paths.pred[source], source as i64, "{name}");
        for v in (0..d.len()).filter(|&v| v != source) {
            let p = paths.pred[v];
            if !d[v].is_finite() {
                assert_eq!(p, -1, "{name}: unreached {v} has a predecessor");
                continue;
            }
            let w = weight[&(p as usize, v)];
            assert_eq!(d[p as usize] + w, d[v], "{name}: predecessor {p} of {v}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Every example against the reference evaluator on small inputs

fn random(format: &str, shape: &[usize], density: f64, seed: u64) -> Tensor {
    tessera::tensor::random_sparse(&fmt(format), shape, density, seed).unwrap()
}

/// A small deterministic 8-bit image with values over the whole range.
fn small_image(h: usize, w: usize, seed: u64) -> Tensor {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let px: Vec<u8> = (0..h * w)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect();
    Tensor::from_dense(
        &fmt("Dense(Dense(Element(0x00)))"),
        &[h, w],
        &Buffer::U8(px.into()),
    )
    .unwrap()
}

impl Kernels {
    /// Run compiled and with the evaluator; every tensor must agree (the inputs are small
    /// integers, so sums are exact whatever their order).
    fn agree(&self, program: &str, ts: BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
        let p: Program = parse(program);
        let want = common::run_eval(&p, &ts).unwrap_or_else(|e| panic!("{e}\n{program}"));
        let mut got = ts;
        self.run(program, &mut got);
        for (n, t) in &got {
            assert_eq!(t.to_dense(), want[n], "{n} in\n{program}");
        }
        got
    }
}

#[test]
fn examples_agree_with_the_evaluator() {
    let k = Kernels::new();
    for seed in 0..3 {
        let a = random(CSR, &[7, 7], 0.4, seed);
        let sym = k.agree(
            SPLIT_SYMMETRIC,
            tensors(vec![
                ("A", a.clone()),
                ("U", empty(CSR, &[7, 7])),
                ("D", empty(DENSE_VEC, &[7])),
            ]),
        );
        k.agree(
            SYMMETRIC_SPMV,
            tensors(vec![
                ("U", sym["U"].clone()),
                ("D", sym["D"].clone()),
                ("x", random(DENSE_VEC, &[7], 0.8, seed + 10)),
                ("y", empty(DENSE_VEC, &[7])),
                ("y_i", empty("Scalar(0.0)", &[])),
            ]),
        );
        let rect = random(CSR, &[5, 8], 0.4, seed + 20);
        k.agree(
            TRIU_SUM,
            tensors(vec![("A", rect.clone()), ("s", empty("Scalar(0.0)", &[]))]),
        );
        k.agree(
            DIAGONAL,
            tensors(vec![("A", a.clone()), ("d", empty(DENSE_VEC, &[7]))]),
        );
        k.agree(
            CONVOLVE1D,
            tensors(vec![
                (
                    "a",
                    random("SparseList(Element(0.0))", &[9], 0.4, seed + 30),
                ),
                ("v", random(DENSE_VEC, &[3], 1.0, seed + 40)),
                ("y", empty(DENSE_VEC, &[11])),
            ]),
        );
        k.agree(
            CONVOLVE2D,
            tensors(vec![
                ("A", rect),
                (
                    "K",
                    random("Dense(Dense(Element(0.0)))", &[2, 3], 1.0, seed + 50),
                ),
                ("C", empty("Dense(Dense(Element(0.0)))", &[6, 10])),
            ]),
        );
        let img = small_image(6, 9, seed);
        for &(f, tmp) in IMAGE_FORMATS {
            let th = k.agree(
                THRESHOLD,
                tensors(vec![
                    ("img", img.clone()),
                    ("T", scalar_input(Scalar::I64(90))),
                    ("mask", empty(f, &[6, 9])),
                ]),
            );
            k.agree(
                EROSION,
                tensors(vec![
                    ("input", th["mask"].clone()),
                    ("output", empty(f, &[6, 9])),
                    ("tmp", empty(tmp, &[9])),
                ]),
            );
            k.agree(
                MASKED_HISTOGRAM,
                tensors(vec![
                    ("img", img.clone()),
                    ("mask", th["mask"].clone()),
                    ("bins", empty("Dense(Element(0))", &[16])),
                ]),
            );
        }
        // One step of each graph kernel from a partial search state.
        let g = random("Dense(SparseList(Pattern()))", &[8, 8], 0.3, seed + 60);
        let frontier = random(FRONTIER, &[8], 0.3, seed + 70);
        let mut visited = bools(&frontier);
        visited[0] = true;
        let visited = Tensor::from_dense(
            &fmt("Dense(Element(false))"),
            &[8],
            &Buffer::Bool(visited.into()),
        )
        .unwrap();
        let parents: Vec<i64> = (0..8).map(|v| if v % 3 == 0 { v } else { -1 }).collect();
        let parents = Tensor::from_dense(
            &fmt("Dense(Element(-1))"),
            &[8],
            &Buffer::I64(parents.into()),
        )
        .unwrap();
        let state = |extra: Vec<(&str, Tensor)>| {
            let mut ts = tensors(vec![
                ("F", frontier.clone()),
                ("Fnext", empty(FRONTIER, &[8])),
                ("V", visited.clone()),
                ("P", parents.clone()),
            ]);
            ts.extend(tensors(extra));
            ts
        };
        k.agree(bfs::PUSH, state(vec![("A", g.clone())]));
        k.agree(
            bfs::PULL,
            state(vec![
                ("AT", g.clone()),
                ("p", empty("ShortCircuitScalar(-1)", &[])),
            ]),
        );
        let w = random(bellman_ford::WEIGHTS, &[8, 8], 0.4, seed + 80);
        let dprev: Vec<f64> = (0..8)
            .map(|v| if v % 2 == 0 { v as f64 } else { f64::INFINITY })
            .collect();
        let dprev = Tensor::from_dense(&fmt(DIST), &[8], &Buffer::F64(dprev.into())).unwrap();
        let dprev_by_vertex = dprev.clone();
        // The serial round with either flag format; the split round (its push loop parallel,
        // one chunk here), which writes no flags.
        let round = |improved: Option<&str>| {
            let mut ts = vec![
                ("A", w.clone()),
                ("Dprev", dprev.clone()),
                ("D", dprev.clone()),
                ("Fprev", frontier.clone()),
            ];
            ts.extend(improved.map(|f| ("F", empty(f, &[8]))));
            tensors(ts)
        };
        k.agree(bellman_ford::ROUND, round(Some(FRONTIER)));
        k.agree(bellman_ford::ROUND, round(Some(IMPROVED)));
        k.agree(ROUND_PARALLEL, round(None));
        // The owned round on the weights dealt to 2 and 3 parts (8 vertices: 4 + 4, and
        // 3 + 3 + 3 with one padding entry), D and its flags in parts.
        for parts in [2, 3] {
            let o = Owners::new(8, parts);
            let owned = |t: &Tensor| {
                let Buffer::F64(v) = t.to_dense() else {
                    unreachable!()
                };
                o.deal(&v, f64::INFINITY)
            };
            let dprev =
                Tensor::from_dense(&fmt(DIST), &[o.len()], &Buffer::F64(owned(&dprev).into()))
                    .unwrap();
            let mut members: Vec<i64> = bools(&frontier)
                .into_iter()
                .enumerate()
                .filter(|&(_, f)| f)
                .map(|(v, _)| o.owned(v) as i64)
                .collect();
            members.sort();
            let fprev = Tensor::from_coo(
                &fmt(FRONTIER),
                &[o.len()],
                &[members.clone()],
                &Buffer::Bool(vec![true; members.len()].into()),
                |x, _| x,
            )
            .unwrap();
            let d = Tensor::from_dense(
                &fmt("Dense(Dense(Element(Inf)))"),
                &[o.parts, o.block],
                &Buffer::F64(owned(&dprev_by_vertex).into()),
            )
            .unwrap();
            // Dparts holds the previous distances part by part (the driver passes Dprev's
            // memory), D starts equal to them, and F flags the improved vertices by part.
            k.agree(
                ROUND_OWNED,
                tensors(vec![
                    ("AO", o.weights(&w).unwrap()),
                    ("Dprev", dprev),
                    ("Dparts", d.clone()),
                    ("D", d),
                    (
                        "F",
                        empty("Dense(Dense(Element(false)))", &[o.parts, o.block]),
                    ),
                    ("Fprev", fprev),
                ]),
            );
        }
        k.agree(
            bellman_ford::PREDECESSORS,
            tensors(vec![
                ("A", w),
                ("D", dprev),
                ("P", empty("Dense(Element(-1))", &[8])),
            ]),
        );
        let (words, pad) = word_image(5, 100, seed + 90);
        k.agree(
            EROSION_WORDS,
            tensors(vec![
                ("input", words),
                ("pad", pad),
                ("output", empty(WORDS, &[5, 2])),
                ("tmp", empty("Dense(Element(0))", &[2])),
            ]),
        );
    }
}

const WORDS: &str = "Dense(Dense(Element(0)))";

/// A random binary image of `h` rows and `w` pixels packed 64 per i64 word (pixel x is bit
/// x % 64 of word x / 64, padding bits set), and the padding word vector erosion_words.tess
/// takes.
fn word_image(h: usize, w: usize, seed: u64) -> (Tensor, Tensor) {
    let nw = w.div_ceil(64);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let pad: Vec<i64> = (0..nw)
        .map(|k| {
            let first = w.saturating_sub(64 * k).min(64);
            if first == 64 {
                0
            } else {
                (!0u64 << first) as i64
            }
        })
        .collect();
    let px: Vec<i64> = (0..h * nw)
        .map(|k| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly set pixels, so erosion leaves some standing.
            let y = x | x.rotate_left(21);
            (y as i64) | pad[k % nw]
        })
        .collect();
    (
        Tensor::from_dense(&fmt(WORDS), &[h, nw], &Buffer::I64(px.into())).unwrap(),
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[nw], &Buffer::I64(pad.into())).unwrap(),
    )
}

#[test]
fn erosion_words_equals_erosion_on_the_unpacked_image() {
    let k = Kernels::new();
    let (h, w) = (7, 150);
    for seed in 0..3 {
        let (mut words, pad) = word_image(h, w, seed);
        let unpack = |t: &Tensor| -> Vec<bool> {
            let v = match t.to_dense() {
                Buffer::I64(v) => v,
                other => panic!("expected i64 words, got {:?}", other.elem()),
            };
            let nw = w.div_ceil(64);
            (0..h * w)
                .map(|p| (v[(p / w) * nw + (p % w) / 64] >> ((p % w) % 64)) & 1 == 1)
                .collect()
        };
        let bits = |v: Vec<bool>| {
            Tensor::from_dense(
                &fmt("Dense(Dense(Element(false)))"),
                &[h, w],
                &Buffer::Bool(v.into()),
            )
            .unwrap()
        };
        let mut image = bits(unpack(&words));
        // Two runs, as the image study does: the padding must survive the first.
        for _ in 0..2 {
            let mut ts = tensors(vec![
                ("input", words),
                ("pad", pad.clone()),
                ("output", empty(WORDS, &[h, w.div_ceil(64)])),
                ("tmp", empty("Dense(Element(0))", &[w.div_ceil(64)])),
            ]);
            k.run(EROSION_WORDS, &mut ts);
            words = ts.remove("output").unwrap();
            let mut ts = tensors(vec![
                ("input", image),
                ("output", empty("Dense(Dense(Element(false)))", &[h, w])),
                ("tmp", empty("Dense(Element(false))", &[w])),
            ]);
            k.run(EROSION, &mut ts);
            image = ts.remove("output").unwrap();
            assert_eq!(unpack(&words), bools(&image), "seed {seed}");
        }
        assert!(bools(&image).iter().any(|&b| b), "seed {seed}: all eroded");
    }
}

// ---------------------------------------------------------------------------------------------
// The README's command lines

fn tessera(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tessera {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn readme_commands_run() {
    if data_dir("readme_commands_run").is_none() {
        return;
    }
    let out = tessera(&[
        "run",
        "examples/triu_sum.tess",
        "--in",
        "A=../shared/data/matrices/494_bus.mtx",
        "--out",
        "s",
    ]);
    let s: f64 = out.trim().strip_prefix("s = ").unwrap().parse().unwrap();
    assert_close(s, golden::TRIU_SUM[0].1, "494_bus");
    let info = tessera(&[
        "info",
        "../shared/data/images/coins.png@Dense(SparseRunList(Pattern()))",
    ]);
    assert!(
        info.contains("shape: 303x384") && info.contains("element: bool"),
        "{info}"
    );
    // Threshold into a run-length mask file, then the masked histogram from the files.
    let tmp = std::env::temp_dir().join(format!("tessera-examples-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mask = tmp.join("mask.npy");
    let bins = tmp.join("bins.npy");
    let srl = "Dense(SparseRunList(Pattern()))";
    tessera(&[
        "run",
        "examples/threshold.tess",
        "--in",
        "img=../shared/data/images/coins.png",
        "--scalar",
        "T=100",
        "--out",
        &format!("mask={}@{srl}", mask.display()),
    ]);
    tessera(&[
        "run",
        "examples/masked_histogram.tess",
        "--in",
        "img=../shared/data/images/coins.png",
        "--in",
        &format!("mask={}@{srl}", mask.display()),
        "--out",
        &format!("bins={}@Dense(Element(0))", bins.display()),
        "--shape",
        "bins=16",
    ]);
    let got = load_tensor(bins.to_str().unwrap(), None).unwrap();
    // Erosion twice through files, with a run-length workspace given on the command line.
    let (name, t, want) = golden::EROSION[1];
    assert_eq!(name, "horse");
    let rl = "Dense(RunList(Element(false)))";
    let mut input = tmp.join("horse.npy");
    tessera(&[
        "run",
        "examples/threshold.tess",
        "--in",
        "img=../shared/data/images/horse.png",
        "--scalar",
        &format!("T={t}"),
        "--out",
        &format!("mask={}@{rl}", input.display()),
    ]);
    for (k, &w) in want[1..].iter().enumerate() {
        let output = tmp.join(format!("eroded{}.npy", k + 1));
        tessera(&[
            "run",
            "examples/erosion.tess",
            "--in",
            &format!("input={}@{rl}", input.display()),
            "--out",
            &format!("output={}@{rl}", output.display()),
            "--out",
            "tmp@RunList(Element(false), merge=false)",
        ]);
        let eroded = load_tensor(
            output.to_str().unwrap(),
            Some("Dense(Dense(Element(false)))"),
        );
        assert_eq!(image_sum(&eroded.unwrap()), w, "erosion {}", k + 1);
        input = output;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let (name, _, want) = golden::MASKED_HISTOGRAM[0];
    assert_eq!(name, "coins");
    assert_eq!(i64s(&got), want.to_vec());
}

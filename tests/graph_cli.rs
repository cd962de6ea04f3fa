//! `tessera graph`: BFS parents and Bellman-Ford distances and predecessors written by the
//! command line, checked against references computed here (a queue BFS, Dijkstra), on a
//! generated directed graph and on Erdos971 when ../shared/data is present.

mod common;

use common::cli::{Dir, ok, tessera};
use std::collections::VecDeque;
use tessera::io::{FileData, read_file};
use tessera::runtime::Buffer;

/// A directed graph: (n, edges (from, to, weight)), without duplicate edges.
type Graph = (usize, Vec<(usize, usize, f64)>);

/// A random directed graph with integer weights 1..=9 (a small LCG, so the test is
/// deterministic), plus an unreachable vertex n - 1 that only points outwards.
fn random_graph(n: usize, m: usize) -> Graph {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) as usize
    };
    let mut seen = std::collections::HashSet::new();
    let mut edges = vec![];
    while edges.len() < m {
        let (j, k) = (next() % (n - 1), next() % (n - 1));
        if j != k && seen.insert((j, k)) {
            edges.push((j, k, (next() % 9 + 1) as f64));
        }
    }
    edges.push((n - 1, 0, 1.0));
    (n, edges)
}

fn write_mtx(path: &str, g: &Graph) {
    let mut s = format!(
        "%%MatrixMarket matrix coordinate real general\n{} {} {}\n",
        g.0,
        g.0,
        g.1.len()
    );
    for (j, k, w) in &g.1 {
        s += &format!("{} {} {w}\n", j + 1, k + 1);
    }
    std::fs::write(path, s).unwrap();
}

fn read_npy(path: &str) -> Buffer {
    match read_file(std::path::Path::new(path)).unwrap() {
        FileData::Dense(d) => d.values,
        FileData::Coo(_) => panic!("{path}: expected a dense file"),
    }
}

fn i64s(b: Buffer) -> Vec<i64> {
    match b {
        Buffer::I64(v) => v.into_vec(),
        other => panic!("expected i64 values, got {:?}", other.elem()),
    }
}

fn f64s(b: Buffer) -> Vec<f64> {
    match b {
        Buffer::F64(v) => v.into_vec(),
        other => panic!("expected f64 values, got {:?}", other.elem()),
    }
}

fn bfs_levels(g: &Graph, src: usize) -> Vec<i64> {
    let mut adj = vec![vec![]; g.0];
    for &(j, k, _) in &g.1 {
        adj[j].push(k);
    }
    let mut level = vec![-1i64; g.0];
    level[src] = 0;
    let mut q = VecDeque::from([src]);
    while let Some(j) = q.pop_front() {
        for &k in &adj[j] {
            if level[k] < 0 {
                level[k] = level[j] + 1;
                q.push_back(k);
            }
        }
    }
    level
}

fn dijkstra(g: &Graph, src: usize) -> Vec<f64> {
    let mut d = vec![f64::INFINITY; g.0];
    let mut done = vec![false; g.0];
    d[src] = 0.0;
    for _ in 0..g.0 {
        let Some(j) = (0..g.0)
            .filter(|&v| !done[v] && d[v].is_finite())
            .min_by(|&a, &b| d[a].total_cmp(&d[b]))
        else {
            break;
        };
        done[j] = true;
        for &(a, k, w) in &g.1 {
            if a == j && d[j] + w < d[k] {
                d[k] = d[j] + w;
            }
        }
    }
    d
}

/// `parent` is a BFS tree from `src` whose levels are `want`.
fn check_bfs(what: &str, g: &Graph, src: usize, parent: &[i64], want: &[i64]) {
    let edges: std::collections::HashSet<(usize, usize)> =
        g.1.iter().map(|&(j, k, _)| (j, k)).collect();
    assert_eq!(parent[src], src as i64, "{what}: the source's parent");
    for v in 0..g.0 {
        if want[v] < 0 {
            assert_eq!(parent[v], -1, "{what}: unreachable {v} has a parent");
        } else if v != src {
            let p = usize::try_from(parent[v]).unwrap_or_else(|_| panic!("{what}: {v} unparented"));
            assert!(edges.contains(&(p, v)), "{what}: {p} -> {v} is no edge");
            assert_eq!(want[p], want[v] - 1, "{what}: parent {p} of {v}");
        }
    }
}

fn json_field(line: &str, key: &str) -> f64 {
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    v.get(key)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn bfs_parents_form_a_bfs_tree_in_every_direction() {
    let dir = Dir::new("bfs");
    let g = random_graph(300, 900);
    let path = dir.path("g.mtx");
    write_mtx(&path, &g);
    let src = 3;
    let want = bfs_levels(&g, src);
    assert!(want.iter().any(|&l| l < 0) && want.iter().filter(|&&l| l > 1).count() > 10);
    for alg in ["bfs", "bfs-pull", "bfs-do"] {
        let (parents, dist) = (dir.path("p.npy"), dir.path("d.npy"));
        let line = ok(&[
            "graph",
            alg,
            "--in",
            &format!("A={path}"),
            "--source",
            "3",
            "--out",
            &format!("parents={parents}"),
            "--out",
            &format!("dist={dist}"),
            "--warmup",
            "1",
            "--repeat",
            "2",
            "--json",
        ]);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert_eq!(json_field(&line, "repeats"), 2.0);
        assert!(json_field(&line, "compile_ms") > 0.0, "{line}");
        assert!(json_field(&line, "median_ms") >= json_field(&line, "min_ms"));
        let depth = *want.iter().max().unwrap() as f64;
        assert_eq!(json_field(&line, "iterations"), depth + 1.0, "{alg}");
        let parent = i64s(read_npy(&parents));
        check_bfs(alg, &g, src, &parent, &want);
        let levels: Vec<i64> = f64s(read_npy(&dist)).iter().map(|&l| l as i64).collect();
        assert_eq!(levels, want, "{alg}: levels");
    }
}

#[test]
fn split_push_steps_give_one_threads_files() {
    // `--min-parallel-work 0` splits every push step on 2 and 3 threads; the parents and
    // levels are one thread's byte for byte.
    let dir = Dir::new("bfs-split");
    let g = random_graph(300, 900);
    let path = dir.path("g.mtx");
    write_mtx(&path, &g);
    let files = |threads: &str, work: &str| {
        let (parents, dist) = (
            dir.path(&format!("p{threads}.npy")),
            dir.path(&format!("d{threads}.npy")),
        );
        let line = ok(&[
            "graph",
            "bfs",
            "--in",
            &format!("A={path}"),
            "--source",
            "3",
            "--threads",
            threads,
            "--min-parallel-work",
            work,
            "--out",
            &format!("parents={parents}"),
            "--out",
            &format!("dist={dist}"),
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        let split = v["steps"]["push_split"].as_u64().unwrap();
        let bytes = (
            std::fs::read(&parents).unwrap(),
            std::fs::read(&dist).unwrap(),
        );
        (split, json_field(&line, "iterations") as u64, bytes)
    };
    let (split, _, serial) = files("1", "0");
    assert_eq!(split, 0);
    for threads in ["2", "3"] {
        let (split, steps, got) = files(threads, "0");
        assert_eq!(split, steps, "{threads} threads");
        assert!(
            got == serial,
            "{threads} threads: the files differ from one thread's"
        );
    }
    // At the default threshold this graph's thin steps stay serial.
    let (split, _, got) = files("2", "40000");
    assert_eq!(split, 0);
    assert!(got == serial);
}

#[test]
fn bellman_ford_distances_and_predecessors() {
    let dir = Dir::new("bf");
    let g = random_graph(200, 700);
    let path = dir.path("g.mtx");
    write_mtx(&path, &g);
    let (parents, dist) = (dir.path("p.npy"), dir.path("d.npy"));
    let text = ok(&[
        "graph",
        "bellman-ford",
        "--in",
        &format!("A={path}"),
        "--source",
        "5",
        "--out",
        &format!("parents={parents}"),
        "--out",
        &format!("dist={dist}"),
        "--warmup",
        "1",
        "--repeat",
        "1",
    ]);
    assert!(text.contains("time: compile_ms="), "{text}");
    let want = dijkstra(&g, 5);
    let d = f64s(read_npy(&dist));
    assert_eq!(d, want);
    let pred = i64s(read_npy(&parents));
    assert_eq!(pred[5], 5);
    let weight: std::collections::HashMap<(usize, usize), f64> =
        g.1.iter().map(|&(j, k, w)| ((j, k), w)).collect();
    for v in 0..g.0 {
        if !want[v].is_finite() {
            assert_eq!(pred[v], -1, "unreachable {v} has a predecessor");
        } else if v != 5 {
            let p = pred[v] as usize;
            let w = weight
                .get(&(p, v))
                .unwrap_or_else(|| panic!("{p} -> {v} is no edge"));
            assert_eq!(want[p] + w, want[v], "predecessor {p} of {v} is not tight");
        }
    }
}

#[test]
fn graph_rejects_bad_arguments() {
    let dir = Dir::new("bad");
    let path = dir.path("g.mtx");
    write_mtx(&path, &random_graph(10, 20));
    for (args, needle) in [
        (vec!["graph", "bfs"], "exactly one --in"),
        (
            vec!["graph", "bfs", "--in", &format!("B={path}")],
            "the graph is called A",
        ),
        (
            vec![
                "graph",
                "bfs",
                "--in",
                &format!("A={path}"),
                "--source",
                "10",
            ],
            "outside the graph",
        ),
        (
            vec![
                "graph",
                "bfs",
                "--in",
                &format!("A={path}"),
                "--out",
                "levels=x.npy",
            ],
            "writes `parents` and `dist`",
        ),
    ] {
        let o = tessera(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn bfs_on_erdos971() {
    let Some(data) = common::data_dir("bfs_on_erdos971") else {
        return;
    };
    let path = data.join("matrices/Erdos971.mtx");
    let dir = Dir::new("erdos");
    let parents = dir.path("p.npy");
    ok(&[
        "graph",
        "bfs-do",
        "--in",
        &format!("A={}", path.display()),
        "--source",
        "0",
        "--out",
        &format!("parents={parents}"),
        "--repeat",
        "1",
    ]);
    // The symmetric file holds each undirected edge once; both directions are edges.
    let a = tessera::tensor::files::load_tensor(path.to_str().unwrap(), None).unwrap();
    let mut edges = vec![];
    a.for_each_stored(&mut |c, _| edges.push((c[0], c[1], 1.0)));
    let g = (a.shape[0], edges);
    let want = bfs_levels(&g, 0);
    check_bfs("Erdos971", &g, 0, &i64s(read_npy(&parents)), &want);
}

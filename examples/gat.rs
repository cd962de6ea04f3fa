//! One graph-attention layer (GAT, one head), forward and forward + backward, on a real
//! graph stored as CSR: FreeTensor's GAT workload (issue 16), differentiated by Tessera's
//! `grad` with respect to the features X, the weights W and the attention vectors a1, a2.
//!
//! ```text
//! cargo run --release --example gat -- [GRAPH.mtx] [F_IN] [F] [REPEATS] [--dump DIR] [--backend jit|c] [--check]
//! #   defaults ../shared/data/matrices/ca-HepPh.mtx 32 32 5
//! ```
//!
//! The adjacency is the pattern of GRAPH.mtx plus self-loops, ones stored, in
//! `Dense(SparseList(Element(0.0)))`. X (n × F_IN) and the output cotangent G (n × F) are
//! uniform in [-1, 1), W (F_IN × F) and a1, a2 (F) uniform in [-1, 1) / sqrt(F_IN), from a
//! fixed seed. The forward program is `examples/gat.tess`; the gradient program is what
//! `transforms::grad` makes of it with the seed `O = G`. Prints one JSON line: median times of
//! the forward kernel and the gradient kernel (forward + backward), compile times and
//! checksums; `--check` compares the gradients with central finite differences along a random
//! direction (relative 1e-6). `--dump DIR` writes the inputs (with the edges as `src.npy`, `dst.npy`), O and
//! the gradients as `.npy`, for `bench/gat.py`, which runs PyTorch on the same data.

mod common;

use common::grad_study::{self, dense, format, npy};
use common::{Args, Uniform};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tessera::error::{Error, Result};
use tessera::io::{FileData, read_file};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const PROGRAM: &str = include_str!("gat.tess");

fn uniform(rng: &mut Uniform, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| (2.0 * rng.next() - 1.0) * scale).collect()
}

/// The graph's edges with self-loops, sorted, as (sources, destinations).
fn edges(path: &str) -> Result<(usize, Vec<i64>, Vec<i64>)> {
    let FileData::Coo(coo) = read_file(Path::new(path))? else {
        return Err(Error::Usage(format!(
            "{path}: a sparse matrix file is wanted"
        )));
    };
    let n = coo.shape[0];
    if coo.shape.len() != 2 || coo.shape[1] != n {
        return Err(Error::Usage(format!("{path}: a square matrix is wanted")));
    }
    let mut set: BTreeSet<(i64, i64)> = (0..n as i64).map(|i| (i, i)).collect();
    set.extend(
        coo.coords[0]
            .iter()
            .copied()
            .zip(coo.coords[1].iter().copied()),
    );
    Ok((
        n,
        set.iter().map(|e| e.0).collect(),
        set.iter().map(|e| e.1).collect(),
    ))
}

fn main() -> Result<()> {
    let args = Args::from_env();
    let default_graph = "../shared/data/matrices/ca-HepPh.mtx";
    let graph: String = args.num(0, default_graph.to_string())?;
    let f_in: usize = args.num(1, 32)?;
    let f: usize = args.num(2, 32)?;
    let repeats: usize = args.num(3, 5)?.max(1);
    let runner = args.runner()?;

    let (n, src, dst) = edges(&graph)?;
    let ones = Buffer::F64(vec![1.0; src.len()].into());
    let csr = format("Dense(SparseList(Element(0.0)))")?;
    let a = Tensor::from_coo(&csr, &[n, n], &[src.clone(), dst.clone()], &ones, |x, _| x)?;
    let mut rng = Uniform(32);
    let scale = 1.0 / (f_in as f64).sqrt();
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    inputs.insert("A".into(), a);
    inputs.insert(
        "X".into(),
        dense(&[n, f_in], uniform(&mut rng, n * f_in, 1.0))?,
    );
    inputs.insert(
        "W".into(),
        dense(&[f_in, f], uniform(&mut rng, f_in * f, scale))?,
    );
    inputs.insert("a1".into(), dense(&[f], uniform(&mut rng, f, scale))?);
    inputs.insert("a2".into(), dense(&[f], uniform(&mut rng, f, scale))?);
    for (name, shape) in [
        ("H", vec![n, f]),
        ("O", vec![n, f]),
        ("s", vec![n]),
        ("t", vec![n]),
        ("z", vec![n]),
    ] {
        let len = shape.iter().product();
        inputs.insert(name.into(), dense(&shape, vec![0.0; len])?);
    }
    let seed = dense(&[n, f], uniform(&mut rng, n * f, 1.0))?;

    let wrt = ["X", "W", "a1", "a2"];
    let seeds = BTreeMap::from([("O".to_string(), seed.clone())]);
    let study = grad_study::run(
        &runner,
        (
            PROGRAM,
            args.schedule.as_deref(),
            args.grad_schedule.as_deref(),
        ),
        &inputs,
        &wrt,
        seeds.clone(),
        repeats,
    )?;
    let check = if args.check {
        let fields = grad_study::check(&runner, PROGRAM, &inputs, &seeds, &study, 1e-6)?;
        format!(", {fields}")
    } else {
        String::new()
    };
    if let Some(dir) = &args.dump {
        grad_study::dump_gradients(dir, &wrt, &inputs, &study)?;
        let ids = |v: &[i64]| {
            let values = Buffer::F64(v.iter().map(|&x| x as f64).collect());
            Tensor::from_dense(&format("Dense(Element(0.0))")?, &[v.len()], &values)
        };
        npy(dir, "src", &ids(&src)?)?;
        npy(dir, "dst", &ids(&dst)?)?;
        npy(dir, "G", &seed)?;
        npy(dir, "O", &study.forward["O"])?;
    }
    println!(
        "{{\"graph\": \"{graph}\", \"n\": {n}, \"edges\": {}, \"f_in\": {f_in}, \"f\": {f}, \
         \"backend\": \"{}\", {}{check}}}",
        src.len(),
        args.backend.as_deref().unwrap_or("jit"),
        study.json("O")
    );
    Ok(())
}

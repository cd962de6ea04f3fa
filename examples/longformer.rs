//! Longformer's sliding-window attention (one head), forward and forward + backward, with the
//! band of the window stored as a `SparseBand` level: FreeTensor's Longformer workload (issue
//! 16), differentiated by Tessera's `grad` with respect to Q, K and V.
//!
//! ```text
//! cargo run --release --example longformer -- [N] [D] [W] [REPEATS] [--dump DIR] [--backend jit|c]
//! #   defaults 4096 64 32 5
//! ```
//!
//! N tokens, D features, a window of 2W + 1 (W = 32: Longformer's 65). Q, K, V and the
//! cotangent G of the output are uniform in [-1, 1) from a fixed seed. The forward program is
//! `examples/longformer.tess` (scores on the band, softmax over each window, the weighted sum of
//! V); the backward program is what `transforms::grad` makes of it with the seed `O = G`, run
//! after the forward part in one kernel. Prints one JSON line: the median times of the forward
//! kernel and of the gradient kernel (forward + backward), compile times, and checksums.
//! `--dump DIR` writes Q, K, V, G and the results O, dQ, dK, dV as `.npy`, for
//! `bench/longformer.py`, which runs PyTorch on the same data and compares.

mod common;

use common::{Args, Uniform, median};
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::api::grad::bind;
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::grad::grad;

const PROGRAM: &str = include_str!("longformer.tess");

fn format(text: &str) -> Result<Format> {
    Format::parse(text, None)
}

fn uniform(rng: &mut Uniform, n: usize) -> Vec<f64> {
    (0..n).map(|_| 2.0 * rng.next() - 1.0).collect()
}

fn dense(shape: &[usize], values: Vec<f64>) -> Result<Tensor> {
    Tensor::from_dense(
        &format("Dense(Dense(Element(0.0)))")?,
        shape,
        &Buffer::F64(values),
    )
}

/// The band |i - j| <= w of an n × n matrix, ones stored.
fn band(n: usize, w: usize) -> Result<Tensor> {
    let (mut rows, mut cols) = (vec![], vec![]);
    for i in 0..n {
        for j in i.saturating_sub(w)..(i + w + 1).min(n) {
            rows.push(i as i64);
            cols.push(j as i64);
        }
    }
    let ones = Buffer::F64(vec![1.0; rows.len()]);
    Tensor::from_coo(
        &format("Dense(SparseBand(Element(0.0)))")?,
        &[n, n],
        &[rows, cols],
        &ones,
        |a, _| a,
    )
}

fn npy(dir: &str, name: &str, t: &Tensor) -> Result<()> {
    let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
    let mut f = std::fs::File::create(format!("{dir}/{name}.npy")).map_err(io)?;
    let data = DenseData {
        shape: t.shape.clone(),
        values: t.try_to_dense()?,
    };
    tessera::io::npy::write_npy(&mut f, &data)
}

fn checksum(t: &Tensor) -> f64 {
    match t.to_dense() {
        Buffer::F64(v) => v.iter().sum(),
        _ => f64::NAN,
    }
}

fn main() -> Result<()> {
    let args = Args::from_env();
    let n: usize = args.num(0, 4096)?;
    let d: usize = args.num(1, 64)?;
    let w: usize = args.num(2, 32)?;
    let repeats: usize = args.num(3, 5)?.max(1);
    let runner = args.runner()?;

    let mut rng = Uniform(16);
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for name in ["Q", "K", "V"] {
        inputs.insert(name.into(), dense(&[n, d], uniform(&mut rng, n * d))?);
    }
    let seed = dense(&[n, d], uniform(&mut rng, n * d))?;
    inputs.insert("B".into(), band(n, w)?);
    let scores = "Dense(SparseBand(Element(0.0)))";
    inputs.insert("S".into(), Tensor::empty(&format(scores)?, &[n, n])?);
    inputs.insert(
        "z".into(),
        Tensor::empty(&format("Dense(Element(0.0))")?, &[n])?,
    );
    inputs.insert("O".into(), dense(&[n, d], vec![0.0; n * d])?);

    let program = parse_program(PROGRAM)?;
    // Forward alone.
    let t0 = Instant::now();
    let forward = runner.compile(&program, &tessera::api::formats_of(&inputs))?;
    let forward_compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut fwd = inputs.clone();
    let mut forward_ms = vec![];
    for _ in 0..repeats {
        let t = Instant::now();
        runner.execute(&forward, &mut fwd)?;
        forward_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }

    // Forward + backward: the gradient program, seeded with O's cotangent.
    let gp = grad(&program, &["Q", "K", "V"], &["O"])?;
    let mut all = inputs.clone();
    let seeds = BTreeMap::from([("O".to_string(), seed.clone())]);
    bind(&gp, &mut all, seeds, &BTreeMap::new())?;
    let t0 = Instant::now();
    let backward = runner.compile(&gp.program, &tessera::api::formats_of(&all))?;
    let grad_compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut grad_ms = vec![];
    let mut done = all.clone();
    for _ in 0..repeats {
        done = all.clone();
        let t = Instant::now();
        runner.execute(&backward, &mut done)?;
        grad_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let gradient = |input: &str| -> Result<&Tensor> {
        let name = gp
            .gradients
            .iter()
            .find(|(i, _)| i == input)
            .map(|(_, g)| g.clone())
            .ok_or_else(|| Error::Usage(format!("no gradient for {input}")))?;
        done.get(&name)
            .ok_or_else(|| Error::Usage(format!("gradient {name} missing")))
    };
    let (dq, dk, dv) = (gradient("Q")?, gradient("K")?, gradient("V")?);

    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).map_err(|e| Error::Usage(format!("--dump {dir}: {e}")))?;
        for name in ["Q", "K", "V"] {
            npy(dir, name, &inputs[name])?;
        }
        npy(dir, "G", &seed)?;
        npy(dir, "O", &fwd["O"])?;
        npy(dir, "dQ", dq)?;
        npy(dir, "dK", dk)?;
        npy(dir, "dV", dv)?;
    }
    println!(
        "{{\"n\": {n}, \"d\": {d}, \"w\": {w}, \"backend\": \"{}\", \
         \"forward_ms\": {:.3}, \"grad_ms\": {:.3}, \
         \"forward_compile_ms\": {forward_compile_ms:.1}, \"grad_compile_ms\": {grad_compile_ms:.1}, \
         \"sum_O\": {:.10e}, \"sum_dQ\": {:.10e}, \"sum_dK\": {:.10e}, \"sum_dV\": {:.10e}}}",
        args.backend.as_deref().unwrap_or("jit"),
        median(forward_ms),
        median(grad_ms),
        checksum(&fwd["O"]),
        checksum(dq),
        checksum(dk),
        checksum(dv),
    );
    Ok(())
}

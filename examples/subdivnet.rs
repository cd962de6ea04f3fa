//! SubdivNet's mesh convolution, forward and forward + backward: FreeTensor's SubdivNet
//! workload (issue 16), differentiated by Tessera's `grad` with respect to the face features x
//! and the weights w0..w3.
//!
//! ```text
//! cargo run --release --example subdivnet -- [A] [B] [F_IN] [F] [REPEATS] [--dump DIR] [--backend jit|c] [--check]
//!     [--schedule COMMANDS] [--grad-schedule COMMANDS]
//! #   defaults 96 64 13 64 5: 2 x 96 x 64 = 12,288 faces, 13 -> 64 features
//! ```
//!
//! FreeTensor measured a SHREC11 mesh (`ants/test/1-0.obj`, 12,288 faces), which is not in our
//! data; this driver generates a closed triangle mesh with the same number of faces by a fixed
//! rule, a torus grid (see [`torus_adjacency`]): every face has exactly three neighbours, one
//! across each edge, listed in the order of the edges around the face, which is what the
//! circular difference needs. x (faces × F_IN) and the output cotangent G (faces × F) are
//! uniform in [-1, 1), w0..w3 (F_IN × F) uniform in [-1, 1) / sqrt(F_IN), from a fixed seed.
//! The forward program is `examples/subdivnet.tess`; the gradient program is what
//! `transforms::grad` makes of it with the seed `y = G`. Prints one JSON line: median times
//! of the forward kernel and of the gradient kernel (forward + backward), compile times and
//! checksums. `--check` also compares every gradient with central finite differences along a
//! random direction (relative 1e-6 up to 1,000 faces; 1e-3 above, where the step crosses a
//! kink of `abs`). `--dump DIR` writes adj, x, w0..w3, G, y and the
//! gradients as `.npy`, for `bench/subdivnet.py`, which runs PyTorch and JAX on the same data.

mod common;

use common::grad_study::{self, dense, npy};
use common::{Args, Uniform};
use std::collections::BTreeMap;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const PROGRAM: &str = include_str!("subdivnet.tess");

fn uniform(rng: &mut Uniform, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| (2.0 * rng.next() - 1.0) * scale).collect()
}

/// The face adjacency of a torus grid of `a` × `b` quads, each cut into two triangles: face
/// `2 (p b + q) + t` is triangle `t` of quad (p, q), whose corners are the grid vertices
/// (p, q), (p + 1, q), (p + 1, q + 1), (p, q + 1) (indices modulo a and b). Triangle 0 has
/// corners (p, q), (p + 1, q), (p + 1, q + 1) and triangle 1 (p, q), (p + 1, q + 1), (p, q + 1);
/// row `k` lists the faces across each triangle's edges in corner order (corner 0 to 1, 1 to
/// 2, 2 to 0): for triangle 0 the bottom edge (triangle 1 of quad (p, q - 1)), the right edge
/// (triangle 1 of quad (p + 1, q)) and the diagonal (triangle 1 of the same quad); for
/// triangle 1 the diagonal, the top edge (triangle 0 of quad (p, q + 1)) and the left edge
/// (triangle 0 of quad (p - 1, q)). Closed and 3-regular for a, b >= 3 (no face is its own
/// neighbour, no two edges lead to the same face). `bench/subdivnet.py` builds the same.
fn torus_adjacency(a: usize, b: usize) -> Vec<i64> {
    let face = |p: usize, q: usize, t: usize| (2 * (((p + a) % a) * b + (q + b) % b) + t) as i64;
    let mut adj = Vec::with_capacity(6 * a * b);
    for p in 0..a {
        for q in 0..b {
            adj.extend([face(p, q + b - 1, 1), face(p + 1, q, 1), face(p, q, 1)]);
            adj.extend([face(p, q, 0), face(p, q + 1, 0), face(p + a - 1, q, 0)]);
        }
    }
    adj
}

fn main() -> Result<()> {
    let args = Args::from_env();
    let a: usize = args.num(0, 96)?;
    let b: usize = args.num(1, 64)?;
    let f_in: usize = args.num(2, 13)?;
    let f: usize = args.num(3, 64)?;
    let repeats: usize = args.num(4, 5)?.max(1);
    if a < 3 || b < 3 {
        return Err(Error::Usage(format!(
            "a {a} x {b} torus grid: both sides must be at least 3 for three distinct neighbours"
        )));
    }
    let runner = args.runner()?;
    let n = 2 * a * b;

    let ints = Format::dense(2, tessera::Scalar::I64(0));
    let adj = Tensor::from_dense(&ints, &[n, 3], &Buffer::I64(torus_adjacency(a, b).into()))?;
    let mut rng = Uniform(12288);
    let scale = 1.0 / (f_in as f64).sqrt();
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    inputs.insert("adj".into(), adj);
    inputs.insert(
        "x".into(),
        dense(&[n, f_in], uniform(&mut rng, n * f_in, 1.0))?,
    );
    let wrt = ["x", "w0", "w1", "w2", "w3"];
    for w in &wrt[1..] {
        let values = uniform(&mut rng, f_in * f, scale);
        inputs.insert(w.to_string(), dense(&[f_in, f], values)?);
    }
    inputs.insert("y".into(), dense(&[n, f], vec![0.0; n * f])?);
    let seed = dense(&[n, f], uniform(&mut rng, n * f, 1.0))?;

    let seeds = BTreeMap::from([("y".to_string(), seed.clone())]);
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
        // abs has kinks: a step of 1e-6 along a random direction crosses |a - b| = 0 for a
        // pair or two of the ~10^6 differences of a full mesh (relative error ~1e-4 there,
        // while PyTorch and JAX agree with these gradients to 1e-12); small meshes cross none.
        let rtol = if n <= 1000 { 1e-6 } else { 1e-3 };
        let fields = grad_study::check(&runner, PROGRAM, &inputs, &seeds, &study, rtol)?;
        format!(", {fields}")
    } else {
        String::new()
    };
    if let Some(dir) = &args.dump {
        grad_study::dump_gradients(dir, &wrt, &inputs, &study)?;
        npy(dir, "adj", &inputs["adj"])?;
        npy(dir, "G", &seed)?;
        npy(dir, "y", &study.forward["y"])?;
    }
    println!(
        "{{\"faces\": {n}, \"torus\": [{a}, {b}], \"f_in\": {f_in}, \"f\": {f}, \
         \"backend\": \"{}\", {}{check}}}",
        args.backend.as_deref().unwrap_or("jit"),
        study.json("y")
    );
    Ok(())
}

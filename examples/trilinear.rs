//! Trilinear interpolation of a sparse voxel grid along rays: the ray-sampling phase of
//! Plenoxels, the continuous tensor abstraction's §8.3 study. Voxel `n` holds its feature
//! vector on the piece `[n, n + 1)` of each axis, so a sample at `p` is the integral of the
//! grid over the unit cube `[p, p + 1]³`: `(1 - t) g[n] + t g[n + 1]` per axis with
//! `t = p - n`, which is trilinear interpolation. The grid is
//! `SparseRunList³(Dense(Element))` with real coordinates: only occupied voxels are stored,
//! and a sample in empty space costs three binary searches, not eight gathers.
//!
//! ```text
//! cargo run --release --example trilinear -- [N] [OCCUPANCY_%] [W] [SAMPLES] [REPEATS] [--dump DIR] [--backend jit|c]
//! #   defaults 128 5 96 128 5: a 128³ grid of 28 features, W × W rays of SAMPLES steps
//! ```
//!
//! Prints one JSON line: the occupancy reached, the median kernel time, the grid build and
//! compile times (excluded from the kernel time), and the sum of the output. The first rays
//! are checked against a direct trilinear interpolation. `--dump DIR` writes the occupied
//! voxels (`voxels.npy`, M × 3 as z, y, x), their features (`features.npy`, M × 28), the rays
//! (`origins.npy`, `steps.npy`, R × 3 as x, y, z) and the first rays' output (`head.npy`) for
//! the PyTorch peers (`bench/trilinear.py`).

mod common;

use common::{Args, Uniform, median};
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::Scalar;
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::pieces::{Piece, PieceCoord};

const FEATURES: usize = 28;
/// Rays checked against the direct interpolation.
const CHECKED: usize = 64;

/// The sample `t` of ray `r` is at `origin[r] + t * step[r]` (x, y, z in voxel units; voxel
/// `n`'s value sits at the integer point `n`, as `grid_sample(align_corners=True)` has it).
const PROGRAM: &str = "\
out .= 0.0
for r = _
  let ox = origin[r, 0], oy = origin[r, 1], oz = origin[r, 2], dx = step[r, 0], dy = step[r, 1], dz = step[r, 2]
    for t = _
      for k = 0.0:1.0, j = 0.0:1.0, i = 0.0:1.0
        for c = _
          out[r, t, c] += grid[k + oz + dz * t, j + oy + dy * t, i + ox + dx * t, c] * d(i) * d(j) * d(k)
        end
      end
    end
  end
end
";

/// Occupied voxels `(z, y, x)` of an `n³` grid: solid balls at random centres until at
/// least `fraction` of the grid is covered.
fn scene(rng: &mut Uniform, n: usize, fraction: f64) -> Vec<(usize, usize, usize)> {
    let mut occupied = vec![false; n * n * n];
    let mut count = 0usize;
    let want = (fraction * (n * n * n) as f64).ceil() as usize;
    while count < want {
        let c = [
            rng.next() * n as f64,
            rng.next() * n as f64,
            rng.next() * n as f64,
        ];
        let radius = n as f64 * (1.0 / 32.0 + rng.next() / 10.0);
        let lo = |x: f64| (x - radius).floor().max(0.0) as usize;
        let hi = |x: f64| ((x + radius).ceil() as usize).min(n - 1);
        for z in lo(c[0])..=hi(c[0]) {
            for y in lo(c[1])..=hi(c[1]) {
                for x in lo(c[2])..=hi(c[2]) {
                    let d2 = (z as f64 - c[0]).powi(2)
                        + (y as f64 - c[1]).powi(2)
                        + (x as f64 - c[2]).powi(2);
                    let v = &mut occupied[(z * n + y) * n + x];
                    if d2 <= radius * radius && !*v {
                        *v = true;
                        count += 1;
                        if count >= want {
                            break;
                        }
                    }
                }
            }
        }
    }
    (0..n * n * n)
        .filter(|&v| occupied[v])
        .map(|v| (v / (n * n), (v / n) % n, v % n))
        .collect()
}

/// Orthographic rays over the grid, tilted so they cross voxel boundaries on every axis:
/// `w × w` origins on the plane `z = -2`, `samples` steps reaching `z = n + 2`.
fn rays(n: usize, w: usize, samples: usize) -> (Vec<[f64; 3]>, Vec<[f64; 3]>) {
    let dz = (n as f64 + 4.0) / samples as f64;
    let step = [0.13 * dz, 0.07 * dz, dz];
    let mut origins = vec![];
    for v in 0..w {
        for u in 0..w {
            let at = |k: usize| (k as f64 + 0.5) * (n as f64 - 8.0) / w as f64 - 2.0;
            origins.push([at(u), at(v), -2.0]);
        }
    }
    let steps = vec![step; origins.len()];
    (origins, steps)
}

/// Trilinear interpolation of the dense grid at `(x, y, z)`, zero outside: the oracle.
fn direct(dense: &[f64], n: usize, p: [f64; 3], out: &mut [f64]) {
    out.iter_mut().for_each(|o| *o = 0.0);
    let base = p.map(f64::floor);
    let frac = [p[0] - base[0], p[1] - base[1], p[2] - base[2]];
    for corner in 0..8 {
        let pick = [corner & 1, (corner >> 1) & 1, (corner >> 2) & 1];
        let mut w = 1.0;
        let mut at = [0i64; 3];
        for a in 0..3 {
            w *= if pick[a] == 1 { frac[a] } else { 1.0 - frac[a] };
            at[a] = base[a] as i64 + pick[a] as i64;
        }
        if at.iter().any(|&v| v < 0 || v >= n as i64) {
            continue;
        }
        let (x, y, z) = (at[0] as usize, at[1] as usize, at[2] as usize);
        let cell = ((z * n + y) * n + x) * FEATURES;
        for (c, o) in out.iter_mut().enumerate() {
            *o += w * dense[cell + c];
        }
    }
}

fn npy(dir: &str, name: &str, shape: Vec<usize>, values: Buffer) -> Result<()> {
    let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
    let mut f = std::fs::File::create(format!("{dir}/{name}")).map_err(io)?;
    tessera::io::npy::write_npy(&mut f, &DenseData { shape, values })
}

fn main() -> Result<()> {
    let args = Args::from_env();
    let n: usize = args.num(0, 128)?;
    let occupancy: f64 = args.num(1, 5.0)?;
    let w: usize = args.num(2, 96)?;
    let samples: usize = args.num(3, 128)?;
    let repeats: usize = args.num(4, 5)?;
    if n < 16 || w == 0 || samples == 0 || repeats == 0 || !(0.0..=100.0).contains(&occupancy) {
        return Err(Error::Usage(
            "N >= 16, 0 <= OCCUPANCY_% <= 100, W, SAMPLES and REPEATS >= 1".into(),
        ));
    }
    let mut rng = Uniform(7);
    let voxels = scene(&mut rng, n, occupancy / 100.0);
    let features: Vec<f64> = (0..voxels.len() * FEATURES).map(|_| rng.next()).collect();
    let (origins, steps) = rays(n, w, samples);
    let r = origins.len();

    let t0 = Instant::now();
    let mut pieces: Vec<Piece> = Vec::with_capacity(voxels.len() * FEATURES);
    for (v, &(z, y, x)) in voxels.iter().enumerate() {
        let unit = |k: usize| PieceCoord::right_open(k as f64, k as f64 + 1.0);
        for c in 0..FEATURES {
            pieces.push((
                vec![unit(z), unit(y), unit(x), PieceCoord::Int(c as i64)],
                Scalar::F64(features[v * FEATURES + c]),
            ));
        }
    }
    let real = |inner: &str| format!("SparseRunList({inner}, coord=f64)");
    let grid_format = Format::parse(&real(&real(&real("Dense(Element(0.0))"))), None)?;
    let grid = Tensor::from_pieces(&grid_format, &[0, 0, 0, FEATURES], &pieces)?;
    drop(pieces);
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;

    let flat = |v: &[[f64; 3]]| Buffer::F64(v.iter().flatten().copied().collect());
    let dense2 = |v: &[[f64; 3]]| {
        Tensor::from_dense(
            &Format::parse("Dense(Dense(Element(0.0)))", None)?,
            &[r, 3],
            &flat(v),
        )
    };
    let out_format = Format::parse("Dense(Dense(Dense(Element(0.0))))", None)?;
    let mut tensors: BTreeMap<String, Tensor> = BTreeMap::from([
        ("grid".to_string(), grid),
        ("origin".to_string(), dense2(&origins)?),
        ("step".to_string(), dense2(&steps)?),
        (
            "out".to_string(),
            Tensor::empty(&out_format, &[r, samples, FEATURES])?,
        ),
    ]);
    let runner = args.runner()?;
    let formats = tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let t0 = Instant::now();
    let kernel = runner.compile(&parse_program(PROGRAM)?, &formats)?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut times = vec![];
    for _ in 0..repeats {
        let t0 = Instant::now();
        runner.execute(&kernel, &mut tensors)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let Buffer::F64(out) = tensors["out"].to_dense() else {
        return Err(Error::Usage("the output is not f64".into()));
    };
    let sum: f64 = out.iter().sum();

    // The first rays against the direct interpolation on a dense copy of the grid.
    let mut dense = vec![0.0; n * n * n * FEATURES];
    for (v, &(z, y, x)) in voxels.iter().enumerate() {
        let cell = ((z * n + y) * n + x) * FEATURES;
        dense[cell..cell + FEATURES].copy_from_slice(&features[v * FEATURES..(v + 1) * FEATURES]);
    }
    let mut want = vec![0.0; FEATURES];
    let mut worst = 0.0f64;
    for ray in 0..CHECKED.min(r) {
        for t in 0..samples {
            let p = [0, 1, 2].map(|a| origins[ray][a] + t as f64 * steps[ray][a]);
            direct(&dense, n, p, &mut want);
            let got = &out[(ray * samples + t) * FEATURES..][..FEATURES];
            for (g, w) in got.iter().zip(&want) {
                worst = worst.max((g - w).abs());
            }
        }
    }
    if worst > 1e-9 {
        return Err(Error::Usage(format!(
            "the kernel disagrees with the direct interpolation by {worst}"
        )));
    }

    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).map_err(|e| Error::Usage(format!("--dump {dir}: {e}")))?;
        let coords: Vec<i64> = voxels
            .iter()
            .flat_map(|&(z, y, x)| [z as i64, y as i64, x as i64])
            .collect();
        npy(
            dir,
            "voxels.npy",
            vec![voxels.len(), 3],
            Buffer::I64(coords.into()),
        )?;
        npy(
            dir,
            "features.npy",
            vec![voxels.len(), FEATURES],
            Buffer::F64(features.clone().into()),
        )?;
        npy(dir, "origins.npy", vec![r, 3], flat(&origins))?;
        npy(dir, "steps.npy", vec![r, 3], flat(&steps))?;
        let head = CHECKED.min(r);
        npy(
            dir,
            "head.npy",
            vec![head, samples, FEATURES],
            Buffer::F64((out[..head * samples * FEATURES].to_vec()).into()),
        )?;
    }
    println!(
        "{{\"study\": \"trilinear\", \"n\": {n}, \"occupancy\": {:.4}, \"rays\": {r}, \
         \"samples\": {samples}, \"features\": {FEATURES}, \"median_ms\": {:.3}, \
         \"build_ms\": {build_ms:.1}, \"compile_ms\": {compile_ms:.1}, \"sum\": {sum:.10e}, \
         \"checked_max_error\": {worst:.3e}}}",
        voxels.len() as f64 / (n * n * n) as f64,
        median(times)
    );
    Ok(())
}

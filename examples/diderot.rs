//! Diderot's example programs written in Tessera (issue 15), on generated data (or a real
//! image for iso2d), compiled once and timed; `bench/diderot.py` runs the same data through
//! NumPy/SciPy, checks the results and times them.
//!
//! ```text
//! cargo run --release --example diderot -- EXAMPLE [SIZE] [REPEATS] [--backend jit|c] [--dump DIR] [--image PNG]
//! #   iso2d      examples/iso2d.tess: isocontour points by Newton–Raphson from a grid of seeds
//! #              on a SIZE² image (default 512; `--image` a PNG, e.g. ../shared/data/images/coins.png)
//! #   curvature  examples/curvature.tess: κ1, κ2 of a torus's distance field (SIZE³, default 96)
//! #              at 10⁵ points near its surface
//! #   vr         examples/vr_lite.tess: a SIZE² image of rays through a SIZE³ volume (default 128)
//! #   lic        examples/lic2d.tess: LIC of a SIZE² vortex field (default 256), 20 RK2 steps each way
//! #   probe      a bspln3 field of a SIZE³ volume (default 256) probed at 10⁶ points by a program:
//! #              values, then value + gradient + Hessian
//! ```
//!
//! Prints one JSON line per program (compile time apart, median of REPEATS runs, default 5);
//! `--dump DIR` writes every input and output as `.npy` (0-d ones too) for the Python side.

mod common;

use common::{Args, Uniform, median};
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::levels::{Format, LevelKind};
use tessera::notation::parse::parse_program;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const ISO2D: &str = include_str!("iso2d.tess");
const CURVATURE: &str = include_str!("curvature.tess");
const VR_LITE: &str = include_str!("vr_lite.tess");
const LIC2D: &str = include_str!("lic2d.tess");
const PROBE_VALUE: &str =
    "field F = vol ⊛ bspln3\nfor i = _\n  v[i] = F(px[i], py[i], pz[i])\nend\n";
const PROBE_ALL: &str = "field F = vol ⊛ bspln3
for i = _
  v[i] = F(px[i], py[i], pz[i])
  for c = 0:2
    g[i, c] = grad(F, px[i], py[i], pz[i])[c]
  end
  for a = 0:2, b = 0:2
    H[i, a, b] = hess(F, px[i], py[i], pz[i])[a, b]
  end
end
";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// A dense f64 tensor.
fn dense(shape: &[usize], values: Vec<f64>) -> Result<Tensor> {
    Tensor::from_dense(
        &Format::dense(shape.len(), Scalar::F64(0.0)),
        shape,
        &Buffer::F64(values.into()),
    )
}

/// A 0-d input holding `v` (what `--scalar` gives).
fn scalar(v: Scalar) -> Result<Tensor> {
    Tensor::empty(&Format::new(vec![LevelKind::Element(v)])?, &[])
}

/// An output or workspace of zeros.
fn zeros(shape: &[usize]) -> Result<Tensor> {
    Tensor::empty(&Format::dense(shape.len(), Scalar::F64(0.0)), shape)
}

fn values(t: &Tensor) -> Vec<f64> {
    let v = t.to_dense().converted(tessera::types::ElemType::F64);
    v.as_f64().map(|s| s.to_vec()).unwrap_or_default()
}

struct Case {
    name: &'static str,
    program: &'static str,
    tensors: BTreeMap<String, Tensor>,
}

impl Case {
    fn new(name: &'static str, program: &'static str) -> Case {
        Case {
            name,
            program,
            tensors: BTreeMap::new(),
        }
    }
    fn put(&mut self, n: &str, t: Result<Tensor>) -> Result<()> {
        self.tensors.insert(n.to_string(), t?);
        Ok(())
    }
    fn f(&mut self, n: &str, v: f64) -> Result<()> {
        self.put(n, scalar(Scalar::F64(v)))
    }
}

fn grid_points(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let mut out = vec![];
    let mut v = lo;
    while v < hi {
        out.push(v);
        v += step;
    }
    out
}

fn iso2d(size: usize, image: Option<&str>) -> Result<Case> {
    let mut c = Case::new("iso2d", ISO2D);
    let (shape, img, iso) = match image {
        Some(path) => {
            let t = tessera::tensor::files::load_tensor(path, None)?;
            if t.shape.len() != 2 {
                return Err(Error::Usage(format!("--image {path}: not a 2-d image")));
            }
            (t.shape.clone(), values(&t), 128.0)
        }
        None => {
            // Smooth blobs: a few Gaussians of different widths.
            let s = size as f64;
            let blobs = [
                (0.3, 0.35, 0.12, 1.0),
                (0.65, 0.6, 0.18, 0.8),
                (0.7, 0.25, 0.08, 0.6),
            ];
            let mut v = vec![0.0; size * size];
            for r in 0..size {
                for q in 0..size {
                    for &(cy, cx, w, a) in &blobs {
                        let (dy, dx) = (r as f64 / s - cy, q as f64 / s - cx);
                        v[r * size + q] += a * (-(dy * dy + dx * dx) / (2.0 * w * w)).exp();
                    }
                }
            }
            (vec![size, size], v, 0.5)
        }
    };
    let ys = grid_points(2.0, shape[0] as f64 - 3.0, 4.0);
    let xs = grid_points(2.0, shape[1] as f64 - 3.0, 4.0);
    let (mut px, mut py) = (vec![], vec![]);
    for &y in &ys {
        for &x in &xs {
            px.push(y);
            py.push(x);
        }
    }
    let n = px.len();
    c.put("img", dense(&shape, img))?;
    c.put("px", dense(&[n], px))?;
    c.put("py", dense(&[n], py))?;
    c.f("iso", iso)?;
    c.f("tol", 1e-6)?;
    c.put("steps", scalar(Scalar::I64(10)))?;
    for w in ["x", "y"] {
        c.put(w, zeros(&[]))?;
    }
    for o in ["qx", "qy", "ok"] {
        c.put(o, zeros(&[n]))?;
    }
    Ok(c)
}

/// The signed distance to a torus about axis 0 (radii `big`, `small` in voxels), positive
/// inside, centred in a `size³` volume.
fn torus(size: usize, big: f64, small: f64) -> Vec<f64> {
    let c = (size as f64 - 1.0) / 2.0;
    let mut v = vec![0.0; size * size * size];
    for a in 0..size {
        for b in 0..size {
            for d in 0..size {
                let (x, y, z) = (a as f64 - c, b as f64 - c, d as f64 - c);
                let rho = (y * y + z * z).sqrt();
                v[(a * size + b) * size + d] = small - ((rho - big).powi(2) + x * x).sqrt();
            }
        }
    }
    v
}

fn curvature(size: usize) -> Result<Case> {
    let mut c = Case::new("curvature", CURVATURE);
    let (big, small) = (size as f64 / 4.0, size as f64 / 10.0);
    c.put("vol", dense(&[size; 3], torus(size, big, small)))?;
    // Points on the surface: angles u (around the axis) and v (around the tube).
    let n = 100_000;
    let mut rng = Uniform(15);
    let ctr = (size as f64 - 1.0) / 2.0;
    let (mut px, mut py, mut pz) = (vec![], vec![], vec![]);
    for _ in 0..n {
        let (u, v) = (
            rng.next() * std::f64::consts::TAU,
            rng.next() * std::f64::consts::TAU,
        );
        let rho = big + small * v.cos();
        px.push(ctr + small * v.sin());
        py.push(ctr + rho * u.cos());
        pz.push(ctr + rho * u.sin());
    }
    c.put("px", dense(&[n], px))?;
    c.put("py", dense(&[n], py))?;
    c.put("pz", dense(&[n], pz))?;
    c.put("G", zeros(&[n, 3, 3]))?;
    c.put("f", zeros(&[]))?;
    c.put("k1", zeros(&[n]))?;
    c.put("k2", zeros(&[n]))?;
    Ok(c)
}

/// Two Gaussian blobs and a shell, values in about [0, 1].
fn blobs3(size: usize) -> Vec<f64> {
    let s = size as f64;
    let mut v = vec![0.0; size * size * size];
    for a in 0..size {
        for b in 0..size {
            for d in 0..size {
                let p = [a as f64 / s, b as f64 / s, d as f64 / s];
                let r2 = |c: [f64; 3]| (0..3).map(|k| (p[k] - c[k]).powi(2)).sum::<f64>();
                let shell = (r2([0.5, 0.5, 0.5]).sqrt() - 0.3).abs();
                v[(a * size + b) * size + d] = (-r2([0.45, 0.4, 0.55]) / 0.01).exp()
                    + 0.7 * (-r2([0.6, 0.65, 0.35]) / 0.004).exp()
                    + 0.6 * (-shell * shell / 0.0008).exp();
            }
        }
    }
    v
}

fn vr(size: usize) -> Result<Case> {
    let mut c = Case::new("vr", VR_LITE);
    c.put("vol", dense(&[size; 3], blobs3(size)))?;
    let (w, s) = (size, size as f64);
    c.put("height", scalar(Scalar::I64(w as i64)))?;
    c.put("width", scalar(Scalar::I64(w as i64)))?;
    let h = 0.5;
    c.put("steps", scalar(Scalar::I64(((s - 4.0) / h).floor() as i64)))?;
    let d = (s - 4.0) / w as f64;
    for (n, v) in [
        ("x0", 1.0),
        ("h", h),
        ("ylo", 1.0),
        ("dy", d),
        ("zlo", 1.0),
        ("dz", d),
        ("lo", 0.3),
        ("hi", 0.9),
        ("amax", 0.15),
        ("lx", 0.0),
        ("ly", 0.6),
        ("lz", 0.8),
        ("ka", 0.2),
        ("kd", 0.7),
        ("ks", 0.3),
    ] {
        c.f(n, v)?;
    }
    for ws in ["T", "C"] {
        c.put(ws, zeros(&[]))?;
    }
    c.put("rgb", zeros(&[w, w]))?;
    c.put("alpha", zeros(&[w, w]))?;
    Ok(c)
}

fn lic(size: usize) -> Result<Case> {
    let mut c = Case::new("lic", LIC2D);
    let ctr = (size as f64 - 1.0) / 2.0;
    let (mut u, mut v) = (vec![0.0; size * size], vec![0.0; size * size]);
    for a in 0..size {
        for b in 0..size {
            // A vortex with a saddle-like shear: u along axis 0, v along axis 1.
            let (y, x) = (
                (a as f64 - ctr) / size as f64,
                (b as f64 - ctr) / size as f64,
            );
            u[a * size + b] = -x + 0.3 * y;
            v[a * size + b] = y + 0.2 * (6.0 * x).sin();
        }
    }
    let mut rng = Uniform(3);
    let noise: Vec<f64> = (0..size * size).map(|_| rng.next()).collect();
    c.put("u", dense(&[size, size], u))?;
    c.put("v", dense(&[size, size], v))?;
    c.put("noise", dense(&[size, size], noise))?;
    c.put("steps", scalar(Scalar::I64(20)))?;
    c.f("h", 0.5)?;
    for ws in ["s", "c", "x", "y"] {
        c.put(ws, zeros(&[]))?;
    }
    c.put("out", zeros(&[size, size]))?;
    Ok(c)
}

fn probe(size: usize, all: bool) -> Result<Case> {
    let mut c = if all {
        Case::new("probe value+gradient+hessian", PROBE_ALL)
    } else {
        Case::new("probe value", PROBE_VALUE)
    };
    let mut rng = Uniform(15);
    let vol: Vec<f64> = (0..size * size * size).map(|_| rng.next()).collect();
    c.put("vol", dense(&[size; 3], vol))?;
    let n = 1_000_000;
    let span = size as f64 - 4.0;
    for a in ["px", "py", "pz"] {
        let p: Vec<f64> = (0..n).map(|_| 1.0 + rng.next() * span).collect();
        c.put(a, dense(&[n], p))?;
    }
    c.put("v", zeros(&[n]))?;
    if all {
        c.put("g", zeros(&[n, 3]))?;
        c.put("H", zeros(&[n, 3, 3]))?;
    }
    Ok(c)
}

fn dump(dir: &str, name: &str, t: &Tensor) -> Result<()> {
    let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(format!("{dir}/{name}.npy")).map_err(io)?);
    // 0-d inputs are their fill value.
    let v = if t.shape.is_empty() {
        match t.fill() {
            Scalar::F64(x) => vec![x],
            s => vec![s.as_f64()],
        }
    } else {
        values(t)
    };
    tessera::io::npy::write_npy(
        &mut f,
        &DenseData {
            shape: t.shape.clone(),
            values: Buffer::F64(v.into()),
        },
    )
}

fn run() -> Result<()> {
    let args = Args::from_env();
    let which: String = args.num(0, "iso2d".to_string())?;
    let image = {
        let a: Vec<String> = std::env::args().collect();
        a.iter()
            .position(|x| x == "--image")
            .and_then(|k| a.get(k + 1).cloned())
    };
    let repeats: usize = args.num(2, 5usize)?.max(1);
    let cases = match which.as_str() {
        "iso2d" => vec![iso2d(args.num(1, 512)?, image.as_deref())?],
        "curvature" => vec![curvature(args.num(1, 96)?)?],
        "vr" => vec![vr(args.num(1, 128)?)?],
        "lic" => vec![lic(args.num(1, 256)?)?],
        "probe" => {
            let size = args.num(1, 256)?;
            vec![probe(size, false)?, probe(size, true)?]
        }
        other => {
            return Err(Error::Usage(format!(
                "example `{other}`: iso2d, curvature, vr, lic or probe"
            )));
        }
    };
    let runner = args.runner()?;
    for mut case in cases {
        let formats = case
            .tensors
            .iter()
            .map(|(k, t)| (k.clone(), t.format.clone()))
            .collect();
        let t0 = Instant::now();
        let kernel = runner.compile(&parse_program(case.program)?, &formats)?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut times = vec![];
        for _ in 0..repeats {
            let t0 = Instant::now();
            runner.execute(&kernel, &mut case.tensors)?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "{{\"example\": \"{}\", \"backend\": \"{}\", \"compile_ms\": {compile_ms:.1}, \"median_ms\": {:.3}, \"repeats\": {repeats}}}",
            case.name,
            args.backend.as_deref().unwrap_or("jit"),
            median(times)
        );
        if let Some(dir) = &args.dump {
            std::fs::create_dir_all(dir).map_err(|e| Error::Usage(format!("--dump {dir}: {e}")))?;
            for (n, t) in &case.tensors {
                dump(dir, n, t)?;
            }
        }
    }
    Ok(())
}

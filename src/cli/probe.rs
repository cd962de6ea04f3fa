//! `tessera probe IMAGE --kernel NAME --at POINTS.npy [--deriv 0|1|2] --out OUT.npy`: probe the
//! field `IMAGE ⊛ KERNEL` at points (issue 15, `tessera::fields`).

use clap::Args;
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use tessera::error::{Error, Result};
use tessera::fields::Image;
use tessera::fields::kernel::Kernel;
use tessera::fields::probe::{Field, Wants};
use tessera::io::DenseData;
use tessera::runtime::Buffer;

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// The image: .nrrd / .nhdr (with its orientation), .png (gray) or .npy; 1-, 2- or 3-d
    pub image: String,
    /// Reconstruction kernel: tent, ctmr, bspln3, bspln5 or c4hexic
    #[arg(long)]
    pub kernel: String,
    /// The points: an N x d float64 .npy array (world space if the image has an
    /// orientation, else index space)
    #[arg(long, value_name = "POINTS.npy")]
    pub at: String,
    /// 0: values (N), 1: gradients (N x d), 2: Hessians (N x d x d), in world space
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2))]
    pub deriv: u32,
    /// Write the result here (.npy, atomically); points outside the image get NaN
    #[arg(long, value_name = "OUT.npy")]
    pub out: String,
    /// Compiling backend: `jit` (Cranelift, default), `c` or `tiered` (the probe kernel runs
    /// once, so tiering gains nothing here)
    #[arg(long, default_value = "jit")]
    pub backend: String,
    #[command(flatten)]
    pub memory: super::MemoryArgs,
}

/// The rows of an `N x d` float array.
fn load_points(path: &str, d: usize) -> Result<Vec<f64>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let p = tessera::io::npy::read_npy(BufReader::new(file), path)?;
    let Buffer::F64(v) = p.values else {
        return Err(Error::file(
            path,
            0,
            format!("the points must be float64, found {}", p.values.elem()),
        ));
    };
    match p.shape.as_slice() {
        [_, k] if *k == d => Ok(v.into_vec()),
        // A 1-d image's points may be a plain vector.
        [_] if d == 1 => Ok(v.into_vec()),
        s => Err(Error::file(
            path,
            0,
            format!("the points of a {d}-d image must be an N x {d} array, found shape {s:?}"),
        )),
    }
}

pub fn probe(a: &ProbeArgs) -> Result<String> {
    let kernel = Kernel::named(&a.kernel)?;
    let wants = Wants::order(a.deriv)?;
    // Refuse a derivative the kernel cannot give before reading anything large.
    kernel.checked_derivative(a.deriv)?;
    let backend: Box<dyn tessera::backend::Backend> = match a.backend.as_str() {
        "jit" => Box::new(tessera::backend::Jit::new()),
        "c" => Box::new(tessera::backend::CBackend::new()),
        "tiered" => Box::new(tessera::backend::Tiered::new()),
        other => {
            return Err(Error::Usage(format!(
                "unknown backend `{other}` (jit, c or tiered)"
            )));
        }
    };
    let image = Image::load(Path::new(&a.image))?;
    let d = image.dim();
    let points = load_points(&a.at, d)?;
    let n = points.len() / d;
    let mut field = Field::new(image, kernel, &a.image)?;
    let k = field.compile(backend.as_ref(), wants)?;
    let out = field.probe(&k, &points)?;
    let (shape, values) = match a.deriv {
        0 => (vec![n], out.value),
        1 => (vec![n, d], out.gradient),
        _ => (vec![n, d, d], out.hessian),
    };
    let values = values.expect("the probe computes what was asked for");
    let per: usize = shape[1..].iter().product();
    let outside = values.chunks_exact(per).filter(|v| v[0].is_nan()).count();
    let data = DenseData {
        shape,
        values: Buffer::F64(values.into()),
    };
    tessera::io::write_atomic(Path::new(&a.out), |w| tessera::io::npy::write_npy(w, &data))?;
    let mut text = String::new();
    let _ = writeln!(text, "points = {n}");
    let _ = writeln!(text, "outside = {outside}");
    Ok(text)
}

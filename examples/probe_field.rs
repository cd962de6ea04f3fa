//! Probing a `bspln3` field of a volume at random points (issue 15's performance study): the
//! probe kernel is generated as loop IR (a dense gather over each point's 4³ window, weights
//! by Horner's rule) and compiled once; values alone, then value + gradient + Hessian in one
//! pass.
//!
//! ```text
//! cargo run --release --example probe_field -- [SIZE] [N] [REPEATS] [BACKEND] [--dump DIR]
//! #   defaults 256 1000000 5 jit   (BACKEND: jit or c)
//! ```
//!
//! The volume is `SIZE³` uniform values in `[0, 1)`, the points uniform in `[1, SIZE - 3)³`
//! (every window inside, so SciPy's boundary handling plays no part). Prints one JSON line per
//! measurement (median of REPEATS runs, compile time apart); `--dump DIR` writes the volume,
//! the points and the results as `.npy` so `bench/probe_field.py` checks and times SciPy on
//! the same data.

mod common;

use common::{Uniform, median};
use std::time::Instant;
use tessera::backend::{Backend, CBackend, Jit};
use tessera::error::{Error, Result};
use tessera::fields::Image;
use tessera::fields::kernel::Kernel;
use tessera::fields::probe::{Field, Wants};
use tessera::io::DenseData;
use tessera::runtime::Buffer;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn dump(dir: &str, name: &str, shape: Vec<usize>, values: Vec<f64>) -> Result<()> {
    let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(format!("{dir}/{name}.npy")).map_err(io)?);
    tessera::io::npy::write_npy(
        &mut f,
        &DenseData {
            shape,
            values: Buffer::F64(values.into()),
        },
    )
}

fn run() -> Result<()> {
    let args = common::Args::from_env();
    let (size, n, repeats, backend) = (
        args.num(0, 256usize)?,
        args.num(1, 1_000_000usize)?,
        args.num(2, 5usize)?.max(1),
        args.num(3, "jit".to_string())?,
    );
    if size < 5 {
        return Err(Error::Usage("SIZE must be at least 5".into()));
    }
    let backend: Box<dyn Backend> = match backend.as_str() {
        "jit" => Box::new(Jit::new()),
        "c" => Box::new(CBackend::new()),
        other => return Err(Error::Usage(format!("backend `{other}`: jit or c"))),
    };
    let mut rng = Uniform(15);
    let volume: Vec<f64> = (0..size * size * size).map(|_| rng.next()).collect();
    let span = size as f64 - 4.0;
    let points: Vec<f64> = (0..3 * n).map(|_| 1.0 + rng.next() * span).collect();
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).map_err(|e| Error::Usage(format!("--dump {dir}: {e}")))?;
        dump(dir, "volume", vec![size; 3], volume.clone())?;
        dump(dir, "points", vec![n, 3], points.clone())?;
    }
    let image = Image::new(vec![size; 3], Buffer::F64(volume.into()), None, "volume")?;
    let mut field = Field::new(image, Kernel::named("bspln3")?, "volume")?;
    let all = Wants {
        value: true,
        gradient: true,
        hessian: true,
    };
    for (what, wants) in [("value", Wants::order(0)?), ("value+gradient+hessian", all)] {
        let t = Instant::now();
        let k = field.compile(backend.as_ref(), wants)?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut times = vec![];
        let mut last = None;
        for _ in 0..repeats {
            let t = Instant::now();
            let out = field.probe(&k, &points)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            last = Some(out);
        }
        println!(
            "{{\"what\": \"{what}\", \"backend\": \"{}\", \"n\": {n}, \"size\": {size}, \"compile_ms\": {compile_ms:.2}, \"median_ms\": {:.3}, \"ir_statements\": {}}}",
            backend.name(),
            median(times),
            k.ir.size()
        );
        if let (Some(dir), Some(out)) = (&args.dump, last)
            && wants == all
        {
            dump(dir, "value", vec![n], out.value.unwrap_or_default())?;
            dump(
                dir,
                "gradient",
                vec![n, 3],
                out.gradient.unwrap_or_default(),
            )?;
            dump(
                dir,
                "hessian",
                vec![n, 3, 3],
                out.hessian.unwrap_or_default(),
            )?;
        }
    }
    Ok(())
}

//! Box and radius search over 2-D points (the continuous tensor abstraction's §8.1 study):
//! `N` uniform points in `[0, 10^4]²` as the tensor `P[gx, gy, x, y, id]` of
//! `tessera::algorithms::points` (a uniform grid of cells, then x and y pinpoint levels,
//! `coord=f64`, then the ids), queried with closed boxes and closed discs of growing size, each
//! query one run of the compiled Tessera program of its kind (the query's numbers are 0-d
//! inputs, so each kind compiles once; compile time is reported separately, as is building
//! the tensor).
//!
//! ```text
//! cargo run --release --example point_search -- [N] [QUERIES] [REPEATS] [--dump DIR] [--backend jit|c]
//! #   defaults 1000000 8 5
//! ```
//!
//! Prints one JSON line per query: its kind, size, hit count and median time; `--dump DIR`
//! writes the points (`points.npy`, N × 2 f64) and the queries (`queries.json`) so other
//! libraries run on the same data (`bench/point_search.py`, Shapely's STRtree).

mod common;

use common::{Uniform, median};
use std::time::Instant;
use tessera::Scalar;
use tessera::algorithms::points::{PointIndex, Query};
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::runtime::Buffer;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args = common::Args::from_env();
    let dump = args.dump.clone();
    let (n, queries, repeats) = (
        args.num(0, 1_000_000usize)?,
        args.num(1, 8usize)?,
        args.num(2, 5usize)?.max(1),
    );
    let mut rng = Uniform(42);
    let pts: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.next() * 1e4, rng.next() * 1e4))
        .collect();

    let t0 = Instant::now();
    let mut index = PointIndex::new(&pts)?;
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "built P ({n} points, {} x {} grid cells) in {build_ms:.0} ms",
        index.grid.nx, index.grid.ny
    );

    // Query sizes grow along x (the paper's sweep): half-widths from 5 to 5 * 2^(q-1).
    let center = (5000.0, 5000.0);
    let mut list = vec![];
    for q in 0..queries {
        let h = 5.0 * f64::powi(2.0, q as i32);
        list.push(("box", h));
        list.push(("radius", h));
    }
    if let Some(dir) = &dump {
        let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut flat = Buffer::new(tessera::types::ElemType::F64);
        for &(x, y) in &pts {
            flat.push(Scalar::F64(x));
            flat.push(Scalar::F64(y));
        }
        let mut f = std::fs::File::create(format!("{dir}/points.npy")).map_err(io)?;
        tessera::io::npy::write_npy(
            &mut f,
            &DenseData {
                shape: vec![n, 2],
                values: flat,
            },
        )?;
        let qs: Vec<String> = list
            .iter()
            .map(|(k, h)| format!("{{\"kind\": \"{k}\", \"half\": {h}}}"))
            .collect();
        std::fs::write(
            format!("{dir}/queries.json"),
            format!(
                "{{\"center\": [{}, {}], \"queries\": [{}]}}",
                center.0,
                center.1,
                qs.join(", ")
            ),
        )
        .map_err(io)?;
    }

    let runner = args.runner()?;
    for (kind, h) in list {
        let (cx, cy) = center;
        let q = match kind {
            "box" => Query::Box {
                xmin: cx - h,
                ymin: cy - h,
                xmax: cx + h,
                ymax: cy + h,
            },
            _ => Query::Radius { cx, cy, r: h },
        };
        let t1 = Instant::now();
        let c = index.compile(&runner, q.kind())?;
        let compile_ms = t1.elapsed().as_secs_f64() * 1e3;
        if std::env::var_os("SHOW_IR").is_some() {
            eprintln!("{}", c.compiled().ir);
        }
        let mut times = vec![];
        let mut hits = 0;
        for _ in 0..repeats {
            let t2 = Instant::now();
            hits = index.run(&runner, &c, &q)?.len();
            times.push(t2.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "{{\"kind\": \"{kind}\", \"half\": {h}, \"hits\": {hits}, \"median_ms\": {:.4}, \"compile_ms\": {compile_ms:.2}, \"build_ms\": {build_ms:.1}}}",
            median(times)
        );
    }
    Ok(())
}

//! `tessera points box|radius P.npy`: closed box and disc searches over 2-d points as Tessera
//! programs over continuous tensors (`tessera::algorithms::points`).

use clap::{Args, ValueEnum};
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use tessera::algorithms::points::{self, Query};
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::runtime::Buffer;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shape {
    /// Points with XMIN <= x <= XMAX and YMIN <= y <= YMAX (needs --box)
    Box,
    /// Points at distance at most R from (X, Y) (needs --center and --radius)
    Radius,
}

#[derive(Args, Debug)]
pub struct PointsArgs {
    pub shape: Shape,
    /// The points: an N x 2 float64 .npy array, one (x, y) per row; a point's id is its row
    pub points: String,
    /// The box: XMIN,YMIN,XMAX,YMAX
    #[arg(
        long = "box",
        value_name = "XMIN,YMIN,XMAX,YMAX",
        allow_hyphen_values = true
    )]
    pub bx: Option<String>,
    /// The disc's center: X,Y
    #[arg(long, value_name = "X,Y", allow_hyphen_values = true)]
    pub center: Option<String>,
    /// The disc's radius
    #[arg(long, value_name = "R")]
    pub radius: Option<f64>,
    /// Write the ids found (sorted, int64) to this .npy file (atomically)
    #[arg(long, value_name = "PATH")]
    pub out: Option<String>,
    /// Print the Tessera program first (as `#` comment lines)
    #[arg(long)]
    pub show_program: bool,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift) or `c` (C via the system compiler, cached on disk)
    #[arg(long, default_value = "tiered")]
    pub backend: String,
    #[command(flatten)]
    pub memory: super::MemoryArgs,
    #[command(flatten)]
    pub kernel: super::KernelArgs,
}

/// `a,b,...` as exactly `n` numbers.
fn numbers(s: &str, n: usize, flag: &str, what: &str) -> Result<Vec<f64>> {
    let v: Vec<f64> = s
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::Usage(format!("{flag} expects {what}, got `{s}`")))?;
    if v.len() != n {
        return Err(Error::Usage(format!(
            "{flag} expects {what} ({n} numbers), got `{s}`"
        )));
    }
    Ok(v)
}

fn query(a: &PointsArgs) -> Result<Query> {
    match a.shape {
        Shape::Box => {
            if a.center.is_some() || a.radius.is_some() {
                return Err(Error::Usage(
                    "points box takes --box, not --center / --radius".into(),
                ));
            }
            let s = a
                .bx
                .as_deref()
                .ok_or_else(|| Error::Usage("points box needs --box XMIN,YMIN,XMAX,YMAX".into()))?;
            let v = numbers(s, 4, "--box", "XMIN,YMIN,XMAX,YMAX")?;
            Ok(Query::Box {
                xmin: v[0],
                ymin: v[1],
                xmax: v[2],
                ymax: v[3],
            })
        }
        Shape::Radius => {
            if a.bx.is_some() {
                return Err(Error::Usage(
                    "points radius takes --center and --radius, not --box".into(),
                ));
            }
            let (Some(c), Some(r)) = (a.center.as_deref(), a.radius) else {
                return Err(Error::Usage(
                    "points radius needs --center X,Y and --radius R".into(),
                ));
            };
            let v = numbers(c, 2, "--center", "X,Y")?;
            Ok(Query::Radius {
                cx: v[0],
                cy: v[1],
                r,
            })
        }
    }
}

/// The rows of an `N x 2` float array.
fn load_points(path: &str) -> Result<Vec<(f64, f64)>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let d = tessera::io::npy::read_npy(BufReader::new(file), path)?;
    let Buffer::F64(v) = &d.values else {
        return Err(Error::file(
            path,
            0,
            format!("the points must be float64, found {}", d.values.elem()),
        ));
    };
    match d.shape.as_slice() {
        [_, 2] => Ok(v.chunks_exact(2).map(|p| (p[0], p[1])).collect()),
        s => Err(Error::file(
            path,
            0,
            format!("the points must be an N x 2 array, found shape {s:?}"),
        )),
    }
}

pub fn points(a: &PointsArgs) -> Result<String> {
    let q = query(a)?;
    q.check()?;
    let runner = super::compiling_runner(&a.backend, &a.kernel)?;
    let pts = load_points(&a.points)?;
    let mut index = points::PointIndex::new(&pts).map_err(|e| match e {
        Error::Tensor { msg, .. } => Error::file(&a.points, 0, msg),
        e => e,
    })?;
    let ids = index.search(&runner, &q)?;
    let mut out = String::new();
    if a.show_program {
        // As comments (the ids follow); its input lines are comments already.
        for l in index.program_text(&q).lines() {
            let sep = if l.starts_with('#') { "" } else { "# " };
            let _ = writeln!(out, "{sep}{l}");
        }
    }
    if let Some(path) = &a.out {
        let d = DenseData {
            shape: vec![ids.len()],
            values: Buffer::I64(ids.iter().map(|&i| i as i64).collect()),
        };
        tessera::io::write_atomic(Path::new(path), |w| tessera::io::npy::write_npy(w, &d))?;
    }
    let _ = writeln!(out, "count = {}", ids.len());
    Ok(out)
}

//! Box and radius search over 2-d points as Tessera programs (issue 14; the continuous tensor
//! abstraction's geospatial case study).
//!
//! The points become `P[x, y, id]`: `x` and `y` pinpoints on real dimensions, `id` the point's
//! row in the input, so points with equal coordinates stay distinct. The format is
//! `SparseList(SparseList(SparseList(Pattern()), coord=f64), coord=f64)`: sorted x, then the
//! sorted y of each x, then the ids there. A query loops over a real range of x and y and
//! visits only the points inside it; the radius query tests the disc at each pinpoint.

use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::Runner;
use crate::tensor::Tensor;
use crate::tensor::pieces::{Piece, PieceCoord};
use crate::types::Scalar;
use std::collections::BTreeMap;

/// The storage format of a point tensor `[x, y, id]`.
pub const POINT_FORMAT: &str =
    "SparseList(SparseList(SparseList(Pattern()), coord=f64), coord=f64)";

/// A query region, closed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Query {
    /// `xmin <= x <= xmax` and `ymin <= y <= ymax`.
    Box {
        xmin: f64,
        ymin: f64,
        xmax: f64,
        ymax: f64,
    },
    /// `(x - cx)^2 + (y - cy)^2 <= r^2`.
    Radius { cx: f64, cy: f64, r: f64 },
}

impl Query {
    /// Refuse regions the programs cannot express: non-finite numbers, an empty box, a
    /// negative radius.
    pub fn check(&self) -> Result<()> {
        let nums: Vec<f64> = match *self {
            Query::Box {
                xmin,
                ymin,
                xmax,
                ymax,
            } => vec![xmin, ymin, xmax, ymax],
            Query::Radius { cx, cy, r } => vec![cx, cy, r],
        };
        if nums.iter().any(|v| !v.is_finite()) {
            return Err(Error::Usage(format!(
                "the query needs finite numbers, got {nums:?}"
            )));
        }
        match *self {
            Query::Box {
                xmin,
                ymin,
                xmax,
                ymax,
            } if xmin > xmax || ymin > ymax => Err(Error::Usage(format!(
                "the box needs XMIN <= XMAX and YMIN <= YMAX, got {xmin},{ymin},{xmax},{ymax}"
            ))),
            Query::Radius { r, .. } if r < 0.0 => Err(Error::Usage(format!(
                "the radius must not be negative, got {r}"
            ))),
            _ => Ok(()),
        }
    }

    /// Whether the point lies in the region (the brute-force definition the programs
    /// compute: the same float operations in the same order).
    pub fn contains(&self, x: f64, y: f64) -> bool {
        match *self {
            Query::Box {
                xmin,
                ymin,
                xmax,
                ymax,
            } => xmin <= x && x <= xmax && ymin <= y && y <= ymax,
            Query::Radius { cx, cy, r } => (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r,
        }
    }
}

/// A float literal of the notation that parses back to exactly `v` (Rust's shortest
/// round-trip form; negative values as a subtraction from zero, which is exact).
fn lit(v: f64) -> String {
    if v < 0.0 {
        format!("(0.0 - {:e})", -v)
    } else {
        format!("{:e}", v)
    }
}

/// The next float towards -inf / +inf: loop bounds one step wider than `c -/+ r`, whose
/// rounding could otherwise cut off a point on the circle.
fn below(v: f64) -> f64 {
    if v == 0.0 {
        -f64::MIN_POSITIVE
    } else if v > 0.0 {
        f64::from_bits(v.to_bits() - 1)
    } else {
        f64::from_bits(v.to_bits() + 1)
    }
}

fn above(v: f64) -> f64 {
    -below(-v)
}

/// The program of a query; `O[id]` receives the flags of the points found.
pub fn program_text(q: &Query) -> String {
    match *q {
        Query::Box {
            xmin,
            ymin,
            xmax,
            ymax,
        } => format!(
            "O .= false\nfor x = {}:{}, y = {}:{}, id = _\n  O[id] |= P[x, y, id]\nend\n",
            lit(xmin),
            lit(xmax),
            lit(ymin),
            lit(ymax)
        ),
        // Only the points inside the bounding square are visited; the disc test runs at
        // their pinpoints.
        Query::Radius { cx, cy, r } => {
            let (x, y) = (lit(cx), lit(cy));
            format!(
                "O .= false\nfor x = {}:{}, y = {}:{}\n  if (x - {x}) * (x - {x}) + (y - {y}) * (y - {y}) <= {}\n    for id = _\n      O[id] |= P[x, y, id]\n    end\n  end\nend\n",
                lit(below(cx - r)),
                lit(above(cx + r)),
                lit(below(cy - r)),
                lit(above(cy + r)),
                lit(r * r),
            )
        }
    }
}

/// The point tensor of `(x, y)` pairs (finite coordinates).
pub fn point_tensor(points: &[(f64, f64)]) -> Result<Tensor> {
    let mut pieces: Vec<Piece> = Vec::with_capacity(points.len());
    for (id, &(x, y)) in points.iter().enumerate() {
        if !x.is_finite() || !y.is_finite() {
            return Err(Error::tensor(
                "P",
                format!("point {id} has a coordinate that is not finite: ({x}, {y})"),
            ));
        }
        // -0.0 and 0.0 are one point; pieces take +0.0.
        let z = |v: f64| if v == 0.0 { 0.0 } else { v };
        pieces.push((
            vec![
                PieceCoord::point(z(x)),
                PieceCoord::point(z(y)),
                PieceCoord::Int(id as i64),
            ],
            Scalar::Bool(true),
        ));
    }
    Tensor::from_pieces(
        &Format::parse(POINT_FORMAT, None)?,
        &[0, 0, points.len()],
        &pieces,
    )
}

/// The ids (sorted) of the points inside `q`.
pub fn search(runner: &Runner, points: &Tensor, q: &Query) -> Result<Vec<usize>> {
    q.check()?;
    let n = points.shape.get(2).copied().unwrap_or(0);
    let mut ts = BTreeMap::new();
    ts.insert("P".to_string(), points.clone());
    ts.insert(
        "O".to_string(),
        Tensor::empty(&Format::parse("Dense(Element(false))", None)?, &[n])?,
    );
    let program = parse_program(&program_text(q))?;
    let formats = ts
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let compiled = runner.compile(&program, &formats)?;
    runner.execute(&compiled, &mut ts)?;
    let mut ids = vec![];
    for (c, v) in ts["O"].pieces() {
        if let (PieceCoord::Int(i), true) = (c[0], v.as_bool()) {
            ids.push(i as usize);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

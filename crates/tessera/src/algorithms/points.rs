//! Box and radius search over 2-d points as Tessera programs (issue 14; the continuous tensor
//! abstraction's geospatial case study).
//!
//! The points become `P[gx, gy, x, y, id]`: `gx` and `gy` the cell of a uniform grid over the
//! points' bounding box (the spatial structure the paper lacked; counted from 1), `x` and `y` pinpoints on
//! real dimensions, `id` the point's row in the input, so points with equal coordinates stay
//! distinct. The format is `Dense(Dense(SparseList(SparseList(SparseList(Pattern()),
//! coord=f64), coord=f64)))`: per cell, the sorted x, then the sorted y of each x, then the ids
//! there. A query loops over the cells its region meets and, inside each, over the real range
//! of x (and of y for a box), so it visits only the points of a few cells' slabs; the radius
//! query walks each x's whole y-fiber and tests the disc at each pinpoint. Without the grid a
//! query visited every point of the whole x-slab (`BENCHMARKS.md`, "box and radius search").

use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::{Compiled, Runner};
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use crate::tensor::pieces::{Piece, PieceCoord};
use crate::types::Scalar;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The storage format of a point tensor `[gx, gy, x, y, id]`.
pub const POINT_FORMAT: &str =
    "Dense(Dense(SparseList(SparseList(SparseList(Pattern()), coord=f64), coord=f64)))";

/// The format of a query's output `O[id]`: the ids found, in a COO list, so a query costs
/// nothing per point it does not find (a dense flag vector would be cleared in O(N)).
const OUT_FORMAT: &str = "SparseCOO{1}(Pattern())";

/// The number of the first cell along each axis in `P`. Cells count from 1 (row and column 0
/// stay empty) because a loop range `0:b` is read as a whole dimension `0:n-1` (it sizes the
/// loop and must agree with every dimension the index reaches), while a range `a:b` with
/// `a > 0` is a part of the dimension, which is what a query's cell range is.
const FIRST_CELL: usize = 1;

/// How many points a grid cell holds on average when the points are spread evenly: few
/// enough that a small query scans a handful, enough that the cells' positions stay a small
/// fraction of the tensor.
pub const POINTS_PER_CELL: usize = 32;

/// A uniform grid over a bounding box. A coordinate's cell is `floor((v - origin) / step)`
/// clamped to the grid: monotone in `v` (every float operation in it is), so the points inside
/// `[lo, hi]` lie in the cells from `cell(lo)` to `cell(hi)` — the grid never loses a point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub x0: f64,
    pub y0: f64,
    pub sx: f64,
    pub sy: f64,
    pub nx: usize,
    pub ny: usize,
}

impl Grid {
    /// About `points.len() / per_cell` cells over the points' bounding box, shaped like it.
    pub fn fit(points: &[(f64, f64)], per_cell: usize) -> Grid {
        let (mut x0, mut y0, mut x1, mut y1) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
        for &(x, y) in points {
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
        }
        if points.is_empty() {
            (x0, y0, x1, y1) = (0.0, 0.0, 0.0, 0.0);
        }
        let cells = (points.len() / per_cell.max(1)).max(1) as f64;
        let (w, h) = (x1 - x0, y1 - y0);
        // Cells as square as the box allows; a flat box gets one row or column.
        let nx = if w > 0.0 && h > 0.0 {
            (cells * w / h).sqrt().round().clamp(1.0, cells)
        } else if w > 0.0 {
            cells
        } else {
            1.0
        };
        let ny = (cells / nx).ceil().max(1.0);
        let step = |extent: f64, n: f64| {
            let s = extent / n;
            if s > 0.0 && s.is_finite() { s } else { 1.0 }
        };
        Grid {
            x0,
            y0,
            sx: step(w, nx),
            sy: step(h, ny),
            nx: nx as usize,
            ny: ny as usize,
        }
    }

    fn cell(v: f64, origin: f64, step: f64, n: usize) -> usize {
        // `as` saturates, and clamping keeps the map monotone.
        (((v - origin) / step).floor().max(0.0) as usize).min(n - 1)
    }

    /// The cell column of `x`.
    pub fn cx(&self, x: f64) -> usize {
        Grid::cell(x, self.x0, self.sx, self.nx)
    }

    /// The cell row of `y`.
    pub fn cy(&self, y: f64) -> usize {
        Grid::cell(y, self.y0, self.sy, self.ny)
    }
}

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

/// The loop ranges of a query: the cells, then the real slab (one float step wider than
/// `c -/+ r` for a disc, whose rounding could otherwise cut off a point on the circle).
fn ranges(q: &Query) -> (f64, f64, f64, f64) {
    match *q {
        Query::Box {
            xmin,
            ymin,
            xmax,
            ymax,
        } => (xmin, xmax, ymin, ymax),
        Query::Radius { cx, cy, r } => (below(cx - r), above(cx + r), below(cy - r), above(cy + r)),
    }
}

/// Which program a query runs: one per kind, whatever its numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueryKind {
    Box,
    Radius,
}

impl Query {
    pub fn kind(&self) -> QueryKind {
        match self {
            Query::Box { .. } => QueryKind::Box,
            Query::Radius { .. } => QueryKind::Radius,
        }
    }
}

/// The program of every query of a kind over a [`PointIndex`]; `O[id]` receives the ids of
/// the points found. The query's numbers are inputs ([`QueryInputs`]), not constants, so one
/// compiled kernel serves every query (a program per query would compile for every new one:
/// milliseconds, against microseconds to run it): `qc` holds the cell ranges, `qx` the real
/// slab and, for a disc, its centre and `r * r`. Two short vectors rather than eleven 0-d
/// inputs, because a run's fixed cost grows with the number of tensors it is given.
pub fn program_text(kind: QueryKind) -> String {
    let ranges = "gx = qc[0]:qc[1], gy = qc[2]:qc[3], x = qx[0]:qx[1], y = qx[2]:qx[3]";
    // A disc leaves `y` whole: its cells already bound the rows, and each x-entry holds a
    // one-entry y-fiber (points rarely share an x), so a y-range would only add a search of
    // that one entry and the phase tests against its ends to every candidate; the disc test
    // decides y exactly (`Query::contains`).
    let disc_ranges = "gx = qc[0]:qc[1], gy = qc[2]:qc[3], x = qx[0]:qx[1], y = _";
    match kind {
        QueryKind::Box => {
            format!("O .= false\nfor {ranges}, id = _\n  O[id] |= P[gx, gy, x, y, id]\nend\n")
        }
        // Only the points of the bounding square's cells and x-slab are visited; the disc
        // test runs at their pinpoints. The centre and radius are read once, into variables.
        QueryKind::Radius => format!(
            "O .= false\nlet cx = qx[4], cy = qx[5], r2 = qx[6]\n  for {disc_ranges}\n    if (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r2\n      for id = _\n        O[id] |= P[gx, gy, x, y, id]\n      end\n    end\n  end\nend\n"
        ),
    }
}

/// The numbers of a query as its program reads them ([`program_text`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueryInputs {
    /// `qc`: the first and last cell column, then row, its region meets (counted from
    /// [`FIRST_CELL`]).
    pub cells: [i64; 4],
    /// `qx`: the slab `x0, x1, y0, y1` (a disc's program reads only its x-range), then a
    /// disc's centre and `r * r` (a box's are 0, unread).
    pub reals: [f64; 7],
}

/// The inputs of query `q` for points indexed by `grid`.
pub fn query_inputs(grid: &Grid, q: &Query) -> QueryInputs {
    let (xlo, xhi, ylo, yhi) = ranges(q);
    let cell = |c: usize| (FIRST_CELL + c) as i64;
    let (cx, cy, r2) = match *q {
        Query::Box { .. } => (0.0, 0.0, 0.0),
        Query::Radius { cx, cy, r } => (cx, cy, r * r),
    };
    QueryInputs {
        cells: [
            cell(grid.cx(xlo)),
            cell(grid.cx(xhi)),
            cell(grid.cy(ylo)),
            cell(grid.cy(yhi)),
        ],
        reals: [xlo, xhi, ylo, yhi, cx, cy, r2],
    }
}

impl QueryInputs {
    /// The tensors `qc` and `qx`.
    pub fn tensors(&self) -> Result<[(&'static str, Tensor); 2]> {
        let dense = |fill: Scalar, values: Buffer, n: usize| {
            Tensor::from_dense(&Format::dense(1, fill), &[n], &values)
        };
        Ok([
            (
                "qc",
                dense(Scalar::I64(0), Buffer::I64(self.cells.to_vec().into()), 4)?,
            ),
            (
                "qx",
                dense(Scalar::F64(0.0), Buffer::F64(self.reals.to_vec().into()), 7)?,
            ),
        ])
    }
}

/// A query program compiled for a [`PointIndex`]'s formats: it runs every query of its kind
/// ([`PointIndex::run`]).
pub struct QueryKernel {
    kind: QueryKind,
    compiled: Rc<Compiled>,
}

impl QueryKernel {
    pub fn kind(&self) -> QueryKind {
        self.kind
    }

    /// The compiled kernel (its loop IR, for `SHOW_IR`-style printing).
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }
}

/// Points indexed for box and radius search: the grid and the tensor `P[gx, gy, x, y, id]`,
/// with the output tensor reused by every query.
pub struct PointIndex {
    pub grid: Grid,
    /// `P` and the output `O`.
    tensors: BTreeMap<String, Tensor>,
}

impl PointIndex {
    /// Index `(x, y)` pairs (finite coordinates) on a grid of about
    /// [`POINTS_PER_CELL`] points a cell.
    pub fn new(points: &[(f64, f64)]) -> Result<PointIndex> {
        PointIndex::with_cell_size(points, POINTS_PER_CELL)
    }

    /// The same with about `per_cell` points a cell (1 gives the finest grid).
    pub fn with_cell_size(points: &[(f64, f64)], per_cell: usize) -> Result<PointIndex> {
        let mut pieces: Vec<Piece> = Vec::with_capacity(points.len());
        for (id, &(x, y)) in points.iter().enumerate() {
            if !x.is_finite() || !y.is_finite() {
                return Err(Error::tensor(
                    "P",
                    format!("point {id} has a coordinate that is not finite: ({x}, {y})"),
                ));
            }
        }
        let grid = Grid::fit(points, per_cell);
        // -0.0 and 0.0 are one point; pieces take +0.0.
        let z = |v: f64| if v == 0.0 { 0.0 } else { v };
        // The pieces in the tensor's order (cell, x, y, id), so that `from_pieces`' sort
        // finds them sorted (one pass) instead of sorting 10^7 pieces by comparison.
        let mut keys: Vec<(usize, usize, f64, f64, usize)> = points
            .iter()
            .enumerate()
            .map(|(id, &(x, y))| (grid.cx(x), grid.cy(y), z(x), z(y), id))
            .collect();
        keys.sort_unstable_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then(a.2.total_cmp(&b.2))
                .then(a.3.total_cmp(&b.3))
                .then(a.4.cmp(&b.4))
        });
        for (cx, cy, x, y, id) in keys {
            pieces.push((
                vec![
                    PieceCoord::Int((FIRST_CELL + cx) as i64),
                    PieceCoord::Int((FIRST_CELL + cy) as i64),
                    PieceCoord::point(x),
                    PieceCoord::point(y),
                    PieceCoord::Int(id as i64),
                ],
                Scalar::Bool(true),
            ));
        }
        let p = Tensor::from_pieces(
            &Format::parse(POINT_FORMAT, None)?,
            &[
                FIRST_CELL + grid.nx,
                FIRST_CELL + grid.ny,
                0,
                0,
                points.len(),
            ],
            &pieces,
        )?;
        let o = Tensor::empty(&Format::parse(OUT_FORMAT, None)?, &[points.len()])?;
        let mut tensors = BTreeMap::from([("P".to_string(), p), ("O".to_string(), o)]);
        // The query's numbers, set before each run (`PointIndex::run`).
        let none = Query::Box {
            xmin: 0.0,
            ymin: 0.0,
            xmax: 0.0,
            ymax: 0.0,
        };
        for (name, t) in query_inputs(&grid, &none).tensors()? {
            tensors.insert(name.to_string(), t);
        }
        Ok(PointIndex { grid, tensors })
    }

    /// The point tensor `P[gx, gy, x, y, id]`.
    pub fn tensor(&self) -> &Tensor {
        &self.tensors["P"]
    }

    /// The program of a query on these points, followed by the values of its inputs as `#`
    /// comment lines.
    pub fn program_text(&self, q: &Query) -> String {
        let inputs = query_inputs(&self.grid, q);
        format!(
            "{}# input qc = {:?}\n# input qx = {:?}\n",
            program_text(q.kind()),
            inputs.cells,
            inputs.reals
        )
    }

    /// The input tensors of query `q` ([`query_inputs`]), for running its program elsewhere
    /// (the reference evaluator).
    pub fn query_tensors(&self, q: &Query) -> Result<BTreeMap<String, Tensor>> {
        Ok(query_inputs(&self.grid, q)
            .tensors()?
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect())
    }

    /// The ids (sorted) of the points inside `q`. The kernel of `q`'s kind compiles on the
    /// runner's first query of that kind and comes from its cache after; to skip even the
    /// cache lookup, compile once ([`PointIndex::compile`]) and [`PointIndex::run`] it.
    pub fn search(&mut self, runner: &Runner, q: &Query) -> Result<Vec<usize>> {
        q.check()?;
        let kernel = self.compile(runner, q.kind())?;
        self.run(runner, &kernel, q)
    }

    /// The kernel of every query of kind `kind` on these points.
    pub fn compile(&self, runner: &Runner, kind: QueryKind) -> Result<QueryKernel> {
        let program = parse_program(&program_text(kind))?;
        let formats = self
            .tensors
            .iter()
            .map(|(k, t)| (k.clone(), t.format.clone()))
            .collect();
        Ok(QueryKernel {
            kind,
            compiled: runner.compile(&program, &formats)?,
        })
    }

    /// Run query `q` with `kernel` (compiled for `q`'s kind by [`PointIndex::compile`]): the
    /// ids (sorted) of the points found.
    pub fn run(&mut self, runner: &Runner, kernel: &QueryKernel, q: &Query) -> Result<Vec<usize>> {
        q.check()?;
        if kernel.kind != q.kind() {
            return Err(Error::Usage(format!(
                "a {:?} query cannot run on the kernel of {:?} queries",
                q.kind(),
                kernel.kind
            )));
        }
        // Written into the inputs' arrays in place: a run allocates nothing for them.
        let inputs = query_inputs(&self.grid, q);
        match input_values(&mut self.tensors, "qc") {
            Some(Buffer::I64(v)) => v.to_mut().copy_from_slice(&inputs.cells),
            _ => {
                return Err(Error::Backend(
                    "internal error: the query input `qc`".into(),
                ));
            }
        }
        match input_values(&mut self.tensors, "qx") {
            Some(Buffer::F64(v)) => v.to_mut().copy_from_slice(&inputs.reals),
            _ => {
                return Err(Error::Backend(
                    "internal error: the query input `qx`".into(),
                ));
            }
        }
        runner.execute(&kernel.compiled, &mut self.tensors)?;
        // The output's one COO level: positions `ptr`, then the coordinates, sorted by its
        // freeze (a Pattern's entries are all `true`).
        let o = &self.tensors["O"].levels[0];
        let (Buffer::I64(ptr), Buffer::I64(idx)) = (&o[0], &o[1]) else {
            return Err(Error::Backend(format!(
                "internal error: the output of a point query is not {OUT_FORMAT}"
            )));
        };
        Ok(idx[ptr[0] as usize..ptr[1] as usize]
            .iter()
            .map(|&i| i as usize)
            .collect())
    }
}

/// The values array of the 1-d dense input `name`.
fn input_values<'a>(
    tensors: &'a mut BTreeMap<String, Tensor>,
    name: &str,
) -> Option<&'a mut Buffer> {
    tensors.get_mut(name)?.levels.get_mut(1)?.get_mut(0)
}

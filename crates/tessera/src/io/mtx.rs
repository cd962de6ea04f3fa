//! Matrix Market (`.mtx`): coordinate and array matrices, real, integer or pattern, general,
//! symmetric or skew-symmetric. Symmetric files are expanded to both triangles as SciPy's
//! `mmread` does, so a kernel sees the matrix the file describes.

use super::{
    CooData, DenseData, FileData, Lines, element_count, parse_f64, parse_index, reserve_hint,
    write_err,
};
use crate::error::{Error, Result};
use crate::runtime::Buffer;
use crate::types::{Class, Scalar};
use std::io::{BufRead, Write};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    Coordinate,
    Array,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
}

impl Symmetry {
    fn name(self) -> &'static str {
        match self {
            Symmetry::General => "general",
            Symmetry::Symmetric => "symmetric",
            Symmetry::Skew => "skew-symmetric",
        }
    }
}

/// Values as read: the field decides the type.
enum Values {
    Real(Vec<f64>),
    Integer(Vec<i64>),
    Pattern(usize),
}

impl Values {
    fn new(field: Field, cap: usize) -> Values {
        match field {
            Field::Real => Values::Real(Vec::with_capacity(cap)),
            Field::Integer => Values::Integer(Vec::with_capacity(cap)),
            Field::Pattern => Values::Pattern(0),
        }
    }

    /// Parse and store one value token (`None` for pattern entries).
    fn push(&mut self, tok: Option<&str>, path: &str, line: usize) -> Result<()> {
        match (self, tok) {
            (Values::Real(v), Some(t)) => v.push(
                parse_f64(t)
                    .ok_or_else(|| Error::file(path, line, format!("`{t}` is not a number")))?,
            ),
            (Values::Integer(v), Some(t)) => v.push(
                t.parse()
                    .map_err(|_| Error::file(path, line, format!("`{t}` is not an integer")))?,
            ),
            (Values::Pattern(n), _) => *n += 1,
            (_, None) => return Err(Error::file(path, line, "missing value")),
        }
        Ok(())
    }

    /// Store a copy of the last value (negated for skew-symmetric mirrors).
    fn mirror_last(&mut self, negate: bool) {
        match self {
            Values::Real(v) => {
                if let Some(&x) = v.last() {
                    v.push(if negate { -x } else { x });
                }
            }
            Values::Integer(v) => {
                if let Some(&x) = v.last() {
                    v.push(if negate { x.wrapping_neg() } else { x });
                }
            }
            Values::Pattern(n) => *n += 1,
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::Real(v) => v.len(),
            Values::Integer(v) => v.len(),
            Values::Pattern(n) => *n,
        }
    }

    fn into_buffer(self) -> Buffer {
        match self {
            Values::Real(v) => Buffer::F64(v.into()),
            Values::Integer(v) => Buffer::I64(v.into()),
            Values::Pattern(n) => Buffer::Bool(vec![true; n].into()),
        }
    }
}

fn parse_header(line: &str, path: &str) -> Result<(Layout, Field, Symmetry)> {
    let bad = |msg: String| Error::file(path, 1, msg);
    let toks: Vec<String> = line
        .split_whitespace()
        .map(|t| t.to_ascii_lowercase())
        .collect();
    let toks: Vec<&str> = toks.iter().map(|t| t.as_str()).collect();
    let [banner, object, layout, field, symmetry] = toks.as_slice() else {
        return Err(bad(format!(
            "bad header `{line}`: expected `%%MatrixMarket matrix coordinate|array \
             real|integer|pattern general|symmetric|skew-symmetric`"
        )));
    };
    if *banner != "%%matrixmarket" {
        return Err(bad(format!(
            "bad header `{line}`: a Matrix Market file starts with `%%MatrixMarket`"
        )));
    }
    if *object != "matrix" {
        return Err(bad(format!(
            "unsupported object `{object}`: only `matrix` is supported"
        )));
    }
    if *field == "complex" || *symmetry == "hermitian" {
        return Err(bad("complex matrices are not supported".into()));
    }
    let layout = match *layout {
        "coordinate" => Layout::Coordinate,
        "array" => Layout::Array,
        other => {
            return Err(bad(format!(
                "unknown format `{other}` (expected coordinate or array)"
            )));
        }
    };
    let field = match *field {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        other => {
            return Err(bad(format!(
                "unknown field `{other}` (expected real, integer or pattern)"
            )));
        }
    };
    let symmetry = match *symmetry {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        other => {
            return Err(bad(format!(
                "unknown symmetry `{other}` (expected general, symmetric or skew-symmetric)"
            )));
        }
    };
    if layout == Layout::Array && field == Field::Pattern {
        return Err(bad("a pattern matrix must use the coordinate format".into()));
    }
    if symmetry == Symmetry::Skew && field == Field::Pattern {
        return Err(bad("a pattern matrix cannot be skew-symmetric".into()));
    }
    Ok((layout, field, symmetry))
}

fn is_skipped(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('%')
}

/// Read a Matrix Market file: coordinate files give [`FileData::Coo`], array files
/// [`FileData::Dense`]. Real values are `f64`, integer `i64`, pattern `true`.
pub fn read_mtx(r: impl BufRead, path: &str) -> Result<FileData> {
    let mut lines = Lines::new(r, path);
    let header = match lines.next_line()? {
        Some((_, l)) => parse_header(l, path)?,
        None => {
            return Err(Error::file(
                path,
                1,
                "empty file: expected a `%%MatrixMarket` header",
            ));
        }
    };
    let (layout, field, symmetry) = header;
    let size_fields = match layout {
        Layout::Coordinate => 3,
        Layout::Array => 2,
    };
    let (size_line, size) = loop {
        match lines.next_line()? {
            None => {
                return Err(Error::file(path, lines.line(), "missing size line"));
            }
            Some((_, l)) if is_skipped(l) => continue,
            Some((n, l)) => {
                let toks: Vec<&str> = l.split_whitespace().collect();
                if toks.len() != size_fields {
                    let want = if size_fields == 3 {
                        "`rows columns entries`"
                    } else {
                        "`rows columns`"
                    };
                    return Err(Error::file(
                        path,
                        n,
                        format!("bad size line `{l}`: expected {want}"),
                    ));
                }
                let mut size = Vec::with_capacity(3);
                for t in toks {
                    size.push(t.parse::<usize>().map_err(|_| {
                        Error::file(path, n, format!("size `{t}` is not a non-negative integer"))
                    })?);
                }
                break (n, size);
            }
        }
    };
    let (rows, cols) = match size.as_slice() {
        [m, n, ..] => (*m, *n),
        _ => return Err(Error::file(path, size_line, "bad size line")),
    };
    if symmetry != Symmetry::General && rows != cols {
        return Err(Error::file(
            path,
            size_line,
            format!("a {rows}x{cols} matrix cannot be symmetric: it is not square"),
        ));
    }
    match layout {
        Layout::Coordinate => {
            let nnz = size.get(2).copied().unwrap_or(0);
            // Refuse a count that cannot be held before reading the entries: two coordinates
            // and a value per entry, twice over for a symmetric file's mirrored entries.
            let per_entry = if symmetry == Symmetry::General {
                24
            } else {
                48
            };
            crate::runtime::memory::check(
                &format!("{path}:{size_line}"),
                &[rows, cols],
                "SparseCOO(2, Element(0.0))",
                (nnz as u64).checked_mul(per_entry),
            )?;
            read_coordinate(&mut lines, path, [rows, cols], nnz, field, symmetry).map(FileData::Coo)
        }
        Layout::Array => read_array(&mut lines, path, size_line, [rows, cols], field, symmetry)
            .map(FileData::Dense),
    }
}

fn read_coordinate<R: BufRead>(
    lines: &mut Lines<R>,
    path: &str,
    shape: [usize; 2],
    nnz: usize,
    field: Field,
    symmetry: Symmetry,
) -> Result<CooData> {
    let fields = if field == Field::Pattern { 2 } else { 3 };
    let cap = reserve_hint(if symmetry == Symmetry::General {
        nnz
    } else {
        nnz.saturating_mul(2)
    });
    let (mut ri, mut ci) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
    let mut values = Values::new(field, cap);
    let mut read = 0usize;
    while let Some((n, l)) = lines.next_line()? {
        if is_skipped(l) {
            continue;
        }
        if read == nnz {
            return Err(Error::file(
                path,
                n,
                format!("too many entries: the size line promises {nnz}"),
            ));
        }
        let (toks, count) = super::fields::<3>(l);
        if count != fields {
            let want = if fields == 2 {
                "`row column`"
            } else {
                "`row column value`"
            };
            return Err(Error::file(
                path,
                n,
                format!("expected {fields} fields {want}, found {count}"),
            ));
        }
        let i = parse_index(toks[0], Some(shape[0]), "row index", path, n)?;
        let j = parse_index(toks[1], Some(shape[1]), "column index", path, n)?;
        values.push((fields == 3).then_some(toks[2]), path, n)?;
        ri.push(i);
        ci.push(j);
        if symmetry != Symmetry::General && i != j {
            ri.push(j);
            ci.push(i);
            values.mirror_last(symmetry == Symmetry::Skew);
        }
        read += 1;
    }
    if read < nnz {
        return Err(Error::file(
            path,
            lines.line(),
            format!("too few entries: the size line promises {nnz}, the file has {read}"),
        ));
    }
    debug_assert_eq!(values.len(), ri.len());
    Ok(CooData {
        shape: shape.to_vec(),
        coords: vec![ri, ci],
        values: values.into_buffer(),
    })
}

fn read_array<R: BufRead>(
    lines: &mut Lines<R>,
    path: &str,
    size_line: usize,
    shape: [usize; 2],
    field: Field,
    symmetry: Symmetry,
) -> Result<DenseData> {
    let [m, n] = shape;
    let total = element_count(&shape, path, size_line)?;
    // Every entry is 8 bytes (f64 or i64) in a dense array.
    let dense = match field {
        Field::Integer => "Dense(Dense(Element(0)))",
        _ => "Dense(Dense(Element(0.0)))",
    };
    crate::runtime::memory::check(
        &format!("{path}:{size_line}"),
        &shape,
        dense,
        (total as u64).checked_mul(8),
    )?;
    // Symmetric arrays list the lower triangle with the diagonal, skew ones without it.
    let expected = match symmetry {
        Symmetry::General => total,
        Symmetry::Symmetric => n.saturating_mul(n.saturating_add(1)) / 2,
        Symmetry::Skew => n.saturating_mul(n.saturating_sub(1)) / 2,
    };
    let mut values = Values::new(field, reserve_hint(expected));
    while let Some((ln, l)) = lines.next_line()? {
        if is_skipped(l) {
            continue;
        }
        // One value a line is the rule, but tolerate several: some writers wrap rows.
        for t in l.split_whitespace() {
            if values.len() == expected {
                return Err(Error::file(
                    path,
                    ln,
                    format!(
                        "too many entries: a {m}x{n} {} array has {expected}",
                        symmetry.name()
                    ),
                ));
            }
            values.push(Some(t), path, ln)?;
        }
    }
    if values.len() < expected {
        return Err(Error::file(
            path,
            lines.line(),
            format!(
                "too few entries: expected {expected}, the file has {}",
                values.len()
            ),
        ));
    }
    // Map the k-th value of the file (column-major, maybe one triangle) to C order.
    let positions = |k: usize| -> (usize, usize) {
        // Only called for general arrays, where m > 0 whenever there is a value.
        (k % m.max(1), k / m.max(1))
    };
    let values = match values {
        Values::Real(v) => Buffer::F64(scatter(v, shape, symmetry, positions, |x| -x).into()),
        Values::Integer(v) => {
            Buffer::I64(scatter(v, shape, symmetry, positions, |x| x.wrapping_neg()).into())
        }
        Values::Pattern(_) => {
            return Err(Error::file(
                path,
                1,
                "a pattern matrix must use the coordinate format",
            ));
        }
    };
    Ok(DenseData {
        shape: shape.to_vec(),
        values,
    })
}

/// Place column-major values (a whole matrix, or the lower triangle of a symmetric one) into a
/// row-major array.
fn scatter<T: Copy + Default>(
    v: Vec<T>,
    [m, n]: [usize; 2],
    symmetry: Symmetry,
    general_pos: impl Fn(usize) -> (usize, usize),
    neg: impl Fn(T) -> T,
) -> Vec<T> {
    let mut out = vec![T::default(); m * n];
    match symmetry {
        Symmetry::General => {
            for (k, x) in v.into_iter().enumerate() {
                let (i, j) = general_pos(k);
                if let Some(slot) = out.get_mut(i * n + j) {
                    *slot = x;
                }
            }
        }
        Symmetry::Symmetric | Symmetry::Skew => {
            let first = usize::from(symmetry == Symmetry::Skew);
            let mut it = v.into_iter();
            for j in 0..n {
                for i in j + first..n {
                    let Some(x) = it.next() else { return out };
                    let mirrored = if symmetry == Symmetry::Skew {
                        neg(x)
                    } else {
                        x
                    };
                    if let Some(slot) = out.get_mut(i * n + j) {
                        *slot = x;
                    }
                    if i != j
                        && let Some(slot) = out.get_mut(j * n + i)
                    {
                        *slot = mirrored;
                    }
                }
            }
        }
    }
    out
}

/// Header field for a buffer's element type; pattern for booleans.
fn field_name(c: Class) -> &'static str {
    match c {
        Class::Bool => "pattern",
        Class::Int => "integer",
        Class::Float => "real",
    }
}

/// A value as Matrix Market text that parses back to the same value.
pub(crate) fn value_text(v: Scalar) -> String {
    match v {
        Scalar::F64(x) => format_float(x, x.to_string()),
        Scalar::F32(x) => format_float(x as f64, x.to_string()),
        Scalar::U64(x) => x.to_string(),
        Scalar::Bool(b) => (b as u8).to_string(),
        other => other.as_i64().to_string(),
    }
}

/// Rust's `{}` is the shortest round-trip decimal; only the non-finite spellings need care so
/// other readers (C's strtod, Python's float) accept them too.
fn format_float(x: f64, text: String) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        text
    }
}

fn check_coo(c: &CooData) -> Result<()> {
    if c.shape.len() != 2 || c.coords.len() != 2 {
        return Err(Error::Usage(format!(
            "Matrix Market holds 2-d tensors, this one has rank {}",
            c.shape.len()
        )));
    }
    if c.coords.iter().any(|v| v.len() != c.values.len()) {
        return Err(Error::Usage(
            "coordinate data with coordinate and value vectors of different lengths".into(),
        ));
    }
    Ok(())
}

/// Write coordinate data as `%%MatrixMarket matrix coordinate real|integer|pattern general`.
pub fn write_mtx_coo(w: &mut dyn Write, c: &CooData) -> Result<()> {
    check_coo(c)?;
    let class = c.values.elem().class();
    let pattern = class == Class::Bool;
    // A pattern file cannot say `false`, so such entries are left out.
    let keep = |k: usize| !pattern || c.values.get(k).as_bool();
    let nnz = (0..c.values.len()).filter(|&k| keep(k)).count();
    writeln!(
        w,
        "%%MatrixMarket matrix coordinate {} general",
        field_name(class)
    )
    .map_err(write_err)?;
    writeln!(w, "{} {} {}", c.shape[0], c.shape[1], nnz).map_err(write_err)?;
    for k in 0..c.values.len() {
        if !keep(k) {
            continue;
        }
        let (i, j) = (c.coords[0][k] + 1, c.coords[1][k] + 1);
        if pattern {
            writeln!(w, "{i} {j}").map_err(write_err)?;
        } else {
            writeln!(w, "{i} {j} {}", value_text(c.values.get(k))).map_err(write_err)?;
        }
    }
    Ok(())
}

/// Write a dense matrix as `%%MatrixMarket matrix array real|integer general` (column-major, as
/// the format requires; booleans as integers 0/1).
pub fn write_mtx_array(w: &mut dyn Write, d: &DenseData) -> Result<()> {
    let [m, n] = d.shape.as_slice() else {
        return Err(Error::Usage(format!(
            "Matrix Market holds 2-d tensors, this one has rank {}",
            d.shape.len()
        )));
    };
    let (m, n) = (*m, *n);
    if m.checked_mul(n) != Some(d.values.len()) {
        return Err(Error::Usage(format!(
            "a {m}x{n} array needs {} values, found {}",
            m.saturating_mul(n),
            d.values.len()
        )));
    }
    let field = match d.values.elem().class() {
        Class::Float => "real",
        _ => "integer",
    };
    writeln!(w, "%%MatrixMarket matrix array {field} general").map_err(write_err)?;
    writeln!(w, "{m} {n}").map_err(write_err)?;
    for j in 0..n {
        for i in 0..m {
            writeln!(w, "{}", value_text(d.values.get(i * n + j))).map_err(write_err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ElemType;

    fn coo(text: &str) -> CooData {
        match read_mtx(text.as_bytes(), "t.mtx").unwrap() {
            FileData::Coo(c) => c,
            other => panic!("expected coordinate data, got {other:?}"),
        }
    }

    fn dense(text: &str) -> DenseData {
        match read_mtx(text.as_bytes(), "t.mtx").unwrap() {
            FileData::Dense(d) => d,
            other => panic!("expected dense data, got {other:?}"),
        }
    }

    /// The error's line, checking the message mentions `needle`.
    fn err_line(text: &str, needle: &str) -> usize {
        match read_mtx(text.as_bytes(), "t.mtx") {
            Err(Error::File { path, line, msg }) => {
                assert_eq!(path, "t.mtx");
                assert!(msg.contains(needle), "`{msg}` should mention `{needle}`");
                line
            }
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn general_real_with_comments() {
        let c = coo(
            "%%MatrixMarket matrix coordinate real general\n% a 3x4 matrix\n\n3 4 3\n1 1 1.5\n\
             % inside\n3 4 -2e-1\n2 3 7\n",
        );
        assert_eq!(c.shape, vec![3, 4]);
        assert_eq!(c.coords, vec![vec![0, 2, 1], vec![0, 3, 2]]);
        assert_eq!(c.values, Buffer::F64(vec![1.5, -0.2, 7.0].into()));
    }

    #[test]
    fn header_is_case_insensitive_and_double_is_real() {
        let c = coo("%%matrixmarket MATRIX Coordinate DOUBLE General\n1 1 1\n1 1 2\n");
        assert_eq!(c.values, Buffer::F64(vec![2.0].into()));
    }

    #[test]
    fn symmetric_mirrors_off_diagonal_entries() {
        let c =
            coo("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n3 1 2\n3 2 4\n");
        assert_eq!(c.coords, vec![vec![0, 2, 0, 2, 1], vec![0, 0, 2, 1, 2]]);
        assert_eq!(c.values, Buffer::F64(vec![1.0, 2.0, 2.0, 4.0, 4.0].into()));
    }

    #[test]
    fn skew_symmetric_negates_the_mirror() {
        let c = coo("%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 5\n");
        assert_eq!(c.coords, vec![vec![1, 0], vec![0, 1]]);
        assert_eq!(c.values, Buffer::I64(vec![5, -5].into()));
    }

    #[test]
    fn pattern_and_integer_fields() {
        let c = coo("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n1 1\n2 1\n");
        assert_eq!(c.coords, vec![vec![0, 1, 0], vec![0, 0, 1]]);
        assert_eq!(c.values, Buffer::Bool(vec![true; 3].into()));
        let c = coo("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 -3\n2 2 9\n");
        assert_eq!(c.values, Buffer::I64(vec![-3, 9].into()));
        assert_eq!(c.values.elem(), ElemType::I64);
    }

    #[test]
    fn array_is_column_major() {
        let d = dense("%%MatrixMarket matrix array real general\n% c\n2 3\n1\n2\n3\n4\n5\n6\n");
        assert_eq!(d.shape, vec![2, 3]);
        // Columns (1,2), (3,4), (5,6) → rows [1 3 5], [2 4 6].
        assert_eq!(
            d.values,
            Buffer::F64(vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0].into())
        );
    }

    #[test]
    fn symmetric_and_skew_arrays_expand() {
        let d = dense("%%MatrixMarket matrix array integer symmetric\n3 3\n1\n2\n3\n4\n5\n6\n");
        assert_eq!(
            d.values,
            Buffer::I64(vec![1, 2, 3, 2, 4, 5, 3, 5, 6].into())
        );
        let d = dense("%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n");
        assert_eq!(
            d.values,
            Buffer::F64(vec![0.0, -1.0, -2.0, 1.0, 0.0, -3.0, 2.0, 3.0, 0.0].into())
        );
    }

    #[test]
    fn errors_name_the_line() {
        let h = "%%MatrixMarket matrix coordinate real general\n";
        assert_eq!(
            err_line("%%MatrixMarket matrix coordinate real\n", "bad header"),
            1
        );
        assert_eq!(err_line("hello world\n", "bad header"), 1);
        assert_eq!(err_line("", "empty"), 1);
        assert_eq!(
            err_line(
                "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
                "complex"
            ),
            1
        );
        assert_eq!(
            err_line(
                "%%MatrixMarket matrix coordinate real hermitian\n",
                "complex"
            ),
            1
        );
        assert_eq!(
            err_line(&format!("{h}% only comments\n"), "missing size line"),
            2
        );
        assert_eq!(err_line(&format!("{h}3 4\n"), "size line"), 2);
        assert_eq!(err_line(&format!("{h}3 -4 1\n"), "-4"), 2);
        assert_eq!(err_line(&format!("{h}3 4 2\n1 1 1.0\n1 x 2.0\n"), "`x`"), 4);
        assert_eq!(
            err_line(&format!("{h}3 4 2\n1 1 1.0\n1 2 abc\n"), "not a number"),
            4
        );
        assert_eq!(
            err_line(&format!("{h}3 4 1\n1 2\n"), "expected 3 fields"),
            3
        );
        assert_eq!(err_line(&format!("{h}3 4 1\n1 2 3 4\n"), "found 4"), 3);
        assert_eq!(err_line(&format!("{h}3 4 1\n4 1 1\n"), "extent is 3"), 3);
        assert_eq!(err_line(&format!("{h}3 4 1\n1 5 1\n"), "column index 5"), 3);
        assert_eq!(err_line(&format!("{h}3 4 1\n0 1 1\n"), "start at 1"), 3);
        assert_eq!(err_line(&format!("{h}3 4 3\n1 1 1\n2 2 2\n"), "too few"), 4);
        assert_eq!(
            err_line(&format!("{h}3 4 1\n1 1 1\n% c\n2 2 2\n"), "too many"),
            5
        );
        let int = "%%MatrixMarket matrix coordinate integer general\n2 2 1\n";
        assert_eq!(err_line(&format!("{int}1 1 1.5\n"), "not an integer"), 3);
        let sym = "%%MatrixMarket matrix coordinate real symmetric\n";
        assert_eq!(err_line(&format!("{sym}2 3 0\n"), "not square"), 2);
        let arr = "%%MatrixMarket matrix array real general\n";
        assert_eq!(err_line(&format!("{arr}2 2\n1\n2\n3\n"), "too few"), 5);
        assert_eq!(err_line(&format!("{arr}1 1\n1\n2\n"), "too many"), 4);
        assert_eq!(
            err_line(
                "%%MatrixMarket matrix array pattern general\n1 1\n",
                "coordinate"
            ),
            1
        );
    }

    #[test]
    fn sizes_beyond_memory_are_refused_at_the_size_line() {
        if crate::runtime::memory::available().is_none() {
            eprintln!("skipping: no /proc/meminfo, so no memory limit by default");
            return;
        }
        let huge = [
            "%%MatrixMarket matrix coordinate real general\n% c\n3 3 1000000000000000000\n",
            "%%MatrixMarket matrix array real general\n% c\n1000000000 1000000000\n1\n",
        ];
        for text in huge {
            match read_mtx(text.as_bytes(), "t.mtx") {
                Err(Error::Memory { tensor, .. }) => assert_eq!(tensor, "t.mtx:3"),
                other => panic!("expected a memory error, got {other:?}"),
            }
        }
    }

    #[test]
    fn coo_writer_round_trips_every_class() {
        let cases = [
            Buffer::F64(vec![0.1, -1e300, 3.0, f64::MIN_POSITIVE].into()),
            Buffer::I64(vec![1, -2, i64::MAX, 0].into()),
            Buffer::Bool(vec![true, true, true, true].into()),
        ];
        for values in cases {
            let c = CooData {
                shape: vec![3, 5],
                coords: vec![vec![0, 2, 1, 2], vec![4, 0, 3, 3]],
                values,
            };
            let mut out = Vec::new();
            write_mtx_coo(&mut out, &c).unwrap();
            assert_eq!(coo(std::str::from_utf8(&out).unwrap()), c);
        }
    }

    #[test]
    fn coo_writer_headers_and_pattern_skips_false() {
        let c = CooData {
            shape: vec![2, 2],
            coords: vec![vec![0, 1], vec![1, 0]],
            values: Buffer::Bool(vec![true, false].into()),
        };
        let mut out = Vec::new();
        write_mtx_coo(&mut out, &c).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n"
        );
        let c = CooData {
            shape: vec![1, 1],
            coords: vec![vec![0], vec![0]],
            values: Buffer::F32(vec![0.1].into()),
        };
        let mut out = Vec::new();
        write_mtx_coo(&mut out, &c).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 0.1\n"
        );
    }

    #[test]
    fn non_finite_values_round_trip() {
        let c = CooData {
            shape: vec![1, 3],
            coords: vec![vec![0, 0, 0], vec![0, 1, 2]],
            values: Buffer::F64(vec![f64::INFINITY, f64::NEG_INFINITY, 2.5].into()),
        };
        let mut out = Vec::new();
        write_mtx_coo(&mut out, &c).unwrap();
        assert_eq!(coo(std::str::from_utf8(&out).unwrap()), c);
        let mut out = Vec::new();
        let nan = CooData {
            values: Buffer::F64(vec![f64::NAN; 3].into()),
            ..c
        };
        write_mtx_coo(&mut out, &nan).unwrap();
        let back = coo(std::str::from_utf8(&out).unwrap());
        assert!(back.values.as_f64().unwrap().iter().all(|x| x.is_nan()));
    }

    #[test]
    fn array_writer_round_trips() {
        let d = DenseData {
            shape: vec![2, 3],
            values: Buffer::F64(vec![1.0, 2.5, 3.0, -4.0, 5.0, 6.0].into()),
        };
        let mut out = Vec::new();
        write_mtx_array(&mut out, &d).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("%%MatrixMarket matrix array real general\n2 3\n1\n-4\n2.5\n"));
        assert_eq!(dense(&text), d);
        let d = DenseData {
            shape: vec![2, 1],
            values: Buffer::I32(vec![7, -8].into()),
        };
        let mut out = Vec::new();
        write_mtx_array(&mut out, &d).unwrap();
        assert_eq!(
            dense(std::str::from_utf8(&out).unwrap()).values,
            Buffer::I64(vec![7, -8].into())
        );
    }

    #[test]
    fn writers_reject_other_ranks() {
        let c = CooData {
            shape: vec![3],
            coords: vec![vec![0]],
            values: Buffer::F64(vec![1.0].into()),
        };
        assert!(matches!(
            write_mtx_coo(&mut Vec::new(), &c),
            Err(Error::Usage(_))
        ));
        let d = DenseData {
            shape: vec![2, 2],
            values: Buffer::F64(vec![1.0].into()),
        };
        assert!(matches!(
            write_mtx_array(&mut Vec::new(), &d),
            Err(Error::Usage(_))
        ));
    }

    /// A real file from the shared data set, if it is there.
    #[test]
    fn reads_a_real_symmetric_matrix() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/matrices/494_bus.mtx");
        if !p.exists() {
            eprintln!("skipping: {} not found", p.display());
            return;
        }
        let FileData::Coo(c) = super::super::read_file(&p).unwrap() else {
            panic!("494_bus should be coordinate data");
        };
        assert_eq!(c.shape, vec![494, 494]);
        let n = c.values.len();
        assert_eq!(c.coords[0].len(), n);
        // Symmetric expansion: every entry has its mirror with the same value.
        let mut set = std::collections::HashMap::new();
        for k in 0..n {
            set.insert((c.coords[0][k], c.coords[1][k]), c.values.get(k));
        }
        for (&(i, j), v) in &set {
            assert_eq!(set.get(&(j, i)), Some(v));
        }
    }
}

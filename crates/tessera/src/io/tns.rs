//! FROSTT (`.tns`): one entry a line, `i1 i2 ... iN value`, 1-based, `#` comments. The format
//! has no header, so a `# shape: 3x4x5` comment (written by [`write_tns`]) carries the extents;
//! without it each extent is the largest index used.

use super::{CooData, Lines, parse_f64, parse_index, write_err};
use crate::error::{Error, Result};
use crate::runtime::Buffer;
use crate::types::Scalar;
use std::io::{BufRead, Write};

/// Values stay integers until the first one that is not.
enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl Values {
    fn push(&mut self, tok: &str, path: &str, line: usize) -> Result<()> {
        if let Values::Int(v) = self
            && let Ok(x) = tok.parse::<i64>()
        {
            v.push(x);
            return Ok(());
        }
        let x = parse_f64(tok)
            .ok_or_else(|| Error::file(path, line, format!("value `{tok}` is not a number")))?;
        if let Values::Int(v) = self {
            // `as` rounds to nearest, as parsing the integer's text as a float would.
            *self = Values::Float(v.iter().map(|&i| i as f64).collect());
        }
        if let Values::Float(v) = self {
            v.push(x);
        }
        Ok(())
    }
}

/// Parse the extents of a `# shape: 3x4x5` comment; `None` if the comment is something else.
fn shape_comment(line: &str, path: &str, n: usize) -> Result<Option<Vec<usize>>> {
    let Some(rest) = line.trim_start().strip_prefix('#') else {
        return Ok(None);
    };
    let rest = rest.trim_start();
    let Some(key) = rest.get(..6) else {
        return Ok(None);
    };
    if !key.eq_ignore_ascii_case("shape:") {
        return Ok(None);
    }
    let dims = rest.get(6..).unwrap_or("").trim();
    if dims.is_empty() {
        return Ok(Some(vec![]));
    }
    dims.split(['x', 'X'])
        .map(|d| {
            d.trim().parse::<usize>().map_err(|_| {
                Error::file(
                    path,
                    n,
                    format!("bad shape comment: `{}` is not an extent", d.trim()),
                )
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Read a FROSTT file. Values are `i64` if every value is an integer, `f64` otherwise.
pub fn read_tns(r: impl BufRead, path: &str) -> Result<CooData> {
    let mut lines = Lines::new(r, path);
    let mut shape: Option<Vec<usize>> = None;
    // The rank and the line that fixed it, from the first entry.
    let mut rank: Option<(usize, usize)> = None;
    let mut coords: Vec<Vec<i64>> = vec![];
    let mut values = Values::Int(vec![]);
    while let Some((n, l)) = lines.next_line()? {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('#') {
            if let Some(s) = shape_comment(t, path, n)? {
                if rank.is_some() {
                    return Err(Error::file(
                        path,
                        n,
                        "the `# shape:` comment must come before the first entry",
                    ));
                }
                if shape.is_some() {
                    return Err(Error::file(path, n, "a second `# shape:` comment"));
                }
                shape = Some(s);
            }
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        let Some((value, idx)) = toks.split_last() else {
            continue;
        };
        match rank {
            None => {
                if let Some(s) = &shape
                    && s.len() != idx.len()
                {
                    return Err(Error::file(
                        path,
                        n,
                        format!(
                            "{} indices on a line, but the shape comment gives {} dimensions",
                            idx.len(),
                            s.len()
                        ),
                    ));
                }
                rank = Some((idx.len(), n));
                coords = vec![vec![]; idx.len()];
            }
            Some((r, first)) if r != idx.len() => {
                return Err(Error::file(
                    path,
                    n,
                    format!(
                        "{} fields, but line {first} has {}: every line needs the same number",
                        toks.len(),
                        r + 1
                    ),
                ));
            }
            Some(_) => {}
        }
        for (d, (tok, dim)) in idx.iter().zip(coords.iter_mut()).enumerate() {
            let extent = shape.as_ref().and_then(|s| s.get(d).copied());
            dim.push(parse_index(
                tok,
                extent,
                &format!("index {}", d + 1),
                path,
                n,
            )?);
        }
        values.push(value, path, n)?;
    }
    let shape = match (shape, rank) {
        (Some(s), _) => s,
        (None, Some(_)) => coords
            .iter()
            .map(|c| c.iter().max().map_or(0, |&m| m as usize + 1))
            .collect(),
        (None, None) => {
            return Err(Error::file(
                path,
                0,
                "no entries and no `# shape:` comment: the tensor's rank is unknown",
            ));
        }
    };
    if rank.is_none() {
        coords = vec![vec![]; shape.len()];
    }
    let values = match values {
        Values::Int(v) => Buffer::I64(v.into()),
        Values::Float(v) => Buffer::F64(v.into()),
    };
    Ok(CooData {
        shape,
        coords,
        values,
    })
}

/// A value as text that reads back to the same value and class: floats keep a `.` or exponent
/// so an all-integral float tensor stays float.
fn value_text(v: Scalar) -> String {
    match v {
        Scalar::F64(_) | Scalar::F32(_) if v.is_nan() => "nan".into(),
        Scalar::F64(_) | Scalar::F32(_) if v.as_f64().is_infinite() => {
            if v.as_f64() > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            }
        }
        // Scalar's Display is the shortest round-trip text and keeps a `.` on floats.
        Scalar::F64(_) | Scalar::F32(_) => v.to_string(),
        Scalar::U64(x) => x.to_string(),
        Scalar::Bool(b) => (b as u8).to_string(),
        other => other.as_i64().to_string(),
    }
}

/// Write coordinate data: a `# shape: AxB` comment, then one 1-based line per entry.
pub fn write_tns(w: &mut dyn Write, c: &CooData) -> Result<()> {
    if c.coords.len() != c.shape.len() || c.coords.iter().any(|v| v.len() != c.values.len()) {
        return Err(Error::Usage(
            "coordinate data with mismatched rank or vector lengths".into(),
        ));
    }
    let dims: Vec<String> = c.shape.iter().map(|n| n.to_string()).collect();
    writeln!(w, "# shape: {}", dims.join("x")).map_err(write_err)?;
    let mut line = String::new();
    for k in 0..c.values.len() {
        line.clear();
        for dim in &c.coords {
            line.push_str(&(dim[k] + 1).to_string());
            line.push(' ');
        }
        line.push_str(&value_text(c.values.get(k)));
        writeln!(w, "{line}").map_err(write_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> CooData {
        read_tns(text.as_bytes(), "t.tns").unwrap()
    }

    fn err_line(text: &str, needle: &str) -> usize {
        match read_tns(text.as_bytes(), "t.tns") {
            Err(Error::File { path, line, msg }) => {
                assert_eq!(path, "t.tns");
                assert!(msg.contains(needle), "`{msg}` should mention `{needle}`");
                line
            }
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn integers_and_inferred_shape() {
        let c = read("1 1\n2 2\n3 3\n4 4\n");
        assert_eq!(c.shape, vec![4]);
        assert_eq!(c.coords, vec![vec![0, 1, 2, 3]]);
        assert_eq!(c.values, Buffer::I64(vec![1, 2, 3, 4].into()));
        let c = read("# a comment\n1 3 2 5\n\n2 1 4 -7\n");
        assert_eq!(c.shape, vec![2, 3, 4]);
        assert_eq!(c.coords, vec![vec![0, 1], vec![2, 0], vec![1, 3]]);
    }

    #[test]
    fn one_float_makes_all_floats() {
        let c = read("1 1 2\n2 2 0.5\n3 1 -3\n");
        assert_eq!(c.values, Buffer::F64(vec![2.0, 0.5, -3.0].into()));
        let c = read("1 1.0\n");
        assert_eq!(c.values, Buffer::F64(vec![1.0].into()));
    }

    #[test]
    fn shape_comment_gives_extents() {
        let c = read("# shape: 4\n1 -1\n2 -1\n3 7\n4 -1\n");
        assert_eq!(c.shape, vec![4]);
        let c = read("# shape: 3x4\n1 2 1.5\n");
        assert_eq!(c.shape, vec![3, 4]);
        assert_eq!(c.coords, vec![vec![0], vec![1]]);
        // An empty tensor still has a shape.
        let c = read("# shape: 5x6\n");
        assert_eq!(c.shape, vec![5, 6]);
        assert_eq!(c.coords, vec![Vec::<i64>::new(), vec![]]);
        assert_eq!(c.values.len(), 0);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(err_line("1 2 3\n2 4\n", "same number"), 2);
        assert_eq!(err_line("1 2 3\n2 x 4\n", "`x`"), 2);
        assert_eq!(err_line("1 2 3\n2 1 abc\n", "not a number"), 2);
        assert_eq!(err_line("1 2 3\n0 1 4\n", "start at 1"), 2);
        assert_eq!(err_line("# shape: 3x4\n1 5 1\n", "extent is 4"), 2);
        assert_eq!(err_line("# shape: 3x4\n1 1 1 1\n", "shape comment"), 2);
        assert_eq!(err_line("# shape: 3xz\n", "`z`"), 1);
        assert_eq!(err_line("1 1\n# shape: 3\n", "before the first entry"), 2);
        assert_eq!(err_line("# nothing\n", "rank is unknown"), 0);
    }

    #[test]
    fn round_trips() {
        let cases = [
            Buffer::F64(vec![1.0, 0.1, -1e300].into()),
            Buffer::I64(vec![1, -2, i64::MIN].into()),
            Buffer::F64(vec![f64::INFINITY, f64::NEG_INFINITY, 2.0].into()),
        ];
        for values in cases {
            let c = CooData {
                shape: vec![3, 4, 5],
                coords: vec![vec![0, 2, 1], vec![3, 0, 0], vec![4, 4, 0]],
                values,
            };
            let mut out = Vec::new();
            write_tns(&mut out, &c).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with("# shape: 3x4x5\n1 4 5 "), "{text}");
            assert_eq!(read(&text), c);
        }
        let c = CooData {
            shape: vec![2],
            coords: vec![vec![1]],
            values: Buffer::Bool(vec![true].into()),
        };
        let mut out = Vec::new();
        write_tns(&mut out, &c).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "# shape: 2\n2 1\n");
    }
}

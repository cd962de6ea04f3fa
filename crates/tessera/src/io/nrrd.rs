//! NRRD images (Teem's format, the one Diderot loads): a text header, then the samples.
//!
//! Supported: magic `NRRD0001` to `NRRD0005`; `type` (every integer width, `float`,
//! `double`, by any of their spellings); `dimension` and `sizes`; `encoding` `raw`, `gzip`
//! (`gz`) and `ascii` (`text`, `txt`); `endian`; `space directions` (or `spacings`) and
//! `space origin`; data attached after the blank line or in a detached `data file` (relative
//! to the header's folder), with `byte skip` and `line skip`. Other fields are read and
//! ignored. Everything malformed is an [`Error::File`] naming the file and the header line;
//! the data's size is checked against the memory limit before anything of that size is
//! allocated.
//!
//! NRRD lists axes fastest first; Tessera's arrays are row-major (the last index fastest), so
//! the result's axes are NRRD's reversed: index `[k, j, i]` is NRRD sample `(i, j, k)`, and the
//! space directions come back in that order too.

use super::DenseData;
use crate::error::{Error, Result};
use crate::runtime::Buffer;
use std::io::{BufRead, Read};
use std::path::Path;

/// An image read from a NRRD file, axes in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Nrrd {
    pub data: DenseData,
    /// `directions[a]`: the world step along index axis `a` (NRRD's `space directions`, or
    /// `spacings` on the diagonal); `None` when the header gives neither.
    pub directions: Option<Vec<Vec<f64>>>,
    /// NRRD's `space origin` (zero when only directions are given).
    pub origin: Option<Vec<f64>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "signed char" | "int8" | "int8_t" => Kind::I8,
            "uchar" | "unsigned char" | "uint8" | "uint8_t" => Kind::U8,
            "short" | "short int" | "signed short" | "signed short int" | "int16" | "int16_t" => {
                Kind::I16
            }
            "ushort" | "unsigned short" | "unsigned short int" | "uint16" | "uint16_t" => Kind::U16,
            "int" | "signed int" | "int32" | "int32_t" => Kind::I32,
            "uint" | "unsigned int" | "uint32" | "uint32_t" => Kind::U32,
            "longlong"
            | "long long"
            | "long long int"
            | "signed long long"
            | "signed long long int"
            | "int64"
            | "int64_t" => Kind::I64,
            "ulonglong"
            | "unsigned long long"
            | "unsigned long long int"
            | "uint64"
            | "uint64_t" => Kind::U64,
            "float" => Kind::F32,
            "double" => Kind::F64,
            _ => return None,
        })
    }

    fn size(self) -> usize {
        match self {
            Kind::I8 | Kind::U8 => 1,
            Kind::I16 | Kind::U16 => 2,
            Kind::I32 | Kind::U32 | Kind::F32 => 4,
            Kind::I64 | Kind::U64 | Kind::F64 => 8,
        }
    }

    /// Bytes per sample once stored in a [`Buffer`] (16-bit types widen to 32, u32 to 64).
    fn stored(self) -> usize {
        match self {
            Kind::I16 | Kind::U16 => 4,
            Kind::U32 => 8,
            k => k.size(),
        }
    }

    /// Decode samples of `size()` bytes each.
    fn decode(self, bytes: &[u8], big: bool) -> Buffer {
        macro_rules! conv {
            ($t:ty, $n:expr, $map:expr) => {
                bytes
                    .chunks_exact($n)
                    .map(|c| {
                        let a: [u8; $n] = c.try_into().expect("chunks of the sample size");
                        let v = if big {
                            <$t>::from_be_bytes(a)
                        } else {
                            <$t>::from_le_bytes(a)
                        };
                        $map(v)
                    })
                    .collect()
            };
        }
        match self {
            Kind::I8 => Buffer::I8(bytes.iter().map(|&b| b as i8).collect()),
            Kind::U8 => Buffer::U8(bytes.to_vec().into()),
            Kind::I16 => Buffer::I32(conv!(i16, 2, i32::from)),
            Kind::U16 => Buffer::I32(conv!(u16, 2, i32::from)),
            Kind::I32 => Buffer::I32(conv!(i32, 4, |v| v)),
            Kind::U32 => Buffer::I64(conv!(u32, 4, i64::from)),
            Kind::I64 => Buffer::I64(conv!(i64, 8, |v| v)),
            Kind::U64 => Buffer::U64(conv!(u64, 8, |v| v)),
            Kind::F32 => Buffer::F32(conv!(f32, 4, |v| v)),
            Kind::F64 => Buffer::F64(conv!(f64, 8, |v| v)),
        }
    }

    /// Parse text samples (the `ascii` encoding).
    fn parse_text(self, words: &[&str]) -> Option<Buffer> {
        fn all<T: std::str::FromStr + Copy>(w: &[&str]) -> Option<crate::runtime::store::Store<T>> {
            w.iter().map(|s| s.parse().ok()).collect()
        }
        Some(match self {
            Kind::I8 => Buffer::I8(all(words)?),
            Kind::U8 => Buffer::U8(all(words)?),
            Kind::I16 => Buffer::I32(all::<i16>(words)?.into_iter().map(i32::from).collect()),
            Kind::U16 => Buffer::I32(all::<u16>(words)?.into_iter().map(i32::from).collect()),
            Kind::I32 => Buffer::I32(all(words)?),
            Kind::U32 => Buffer::I64(all::<u32>(words)?.into_iter().map(i64::from).collect()),
            Kind::I64 => Buffer::I64(all(words)?),
            Kind::U64 => Buffer::U64(all(words)?),
            Kind::F32 => Buffer::F32(all(words)?),
            Kind::F64 => Buffer::F64(all(words)?),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Encoding {
    Raw,
    Gzip,
    Ascii,
}

/// The longest header line accepted (a hostile file cannot make the reader buffer more).
const MAX_LINE: usize = 1 << 16;

/// One header line without its newline; `None` at the end of the stream.
fn read_line(r: &mut impl BufRead, path: &str, line: usize) -> Result<Option<String>> {
    let mut buf = vec![];
    let n = r
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .map_err(|e| Error::io(path, e))?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > MAX_LINE {
        return Err(Error::file(path, line, "header line too long"));
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| Error::file(path, line, "header line is not text"))
}

/// `(1.5,0,0)` → the numbers; `none` → `None`.
fn vector(s: &str) -> std::result::Result<Option<Vec<f64>>, String> {
    if s == "none" {
        return Ok(None);
    }
    let inner = s
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("`{s}` is not a vector `(x,y,z)`"))?;
    inner
        .split(',')
        .map(|w| {
            let w = w.trim();
            w.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("`{w}` is not a finite number"))
        })
        .collect::<std::result::Result<Vec<f64>, String>>()
        .map(Some)
}

/// Split `(a,b) (c,d)` into its vectors (spaces inside parentheses are allowed).
fn vectors(s: &str) -> std::result::Result<Vec<Option<Vec<f64>>>, String> {
    let mut out = vec![];
    let mut rest = s.trim();
    while !rest.is_empty() {
        let end = if rest.starts_with('(') {
            rest.find(')').map(|k| k + 1).ok_or("an unclosed `(`")?
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        let word: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
        out.push(vector(&word)?);
        rest = rest[end..].trim_start();
    }
    Ok(out)
}

/// Read a NRRD file from disk (a detached `data file` is found beside it).
pub fn read_nrrd_file(path: &Path) -> Result<Nrrd> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    read_nrrd(std::io::BufReader::new(f), &name, Some(&dir))
}

/// Read a NRRD stream; `dir` is where a detached data file is looked for (`None`: detached
/// data is an error).
pub fn read_nrrd(mut r: impl BufRead, path: &str, dir: Option<&Path>) -> Result<Nrrd> {
    let mut line = 1;
    let magic = read_line(&mut r, path, line)?.unwrap_or_default();
    let ok_magic = magic
        .strip_prefix("NRRD000")
        .is_some_and(|v| matches!(v, "1" | "2" | "3" | "4" | "5"));
    if !ok_magic {
        return Err(Error::file(
            path,
            1,
            "not a NRRD file (magic NRRD0001..NRRD0005)",
        ));
    }
    let mut kind = None;
    let mut dim: Option<(usize, usize)> = None;
    let mut sizes: Option<(Vec<usize>, usize)> = None;
    let mut encoding = None;
    let mut big = None;
    let mut dirs: Option<(Vec<Option<Vec<f64>>>, usize)> = None;
    let mut spacings: Option<(Vec<f64>, usize)> = None;
    let mut origin: Option<(Vec<f64>, usize)> = None;
    let mut space_dim: Option<(usize, usize)> = None;
    let mut data_file: Option<(String, usize)> = None;
    let mut byte_skip: i64 = 0;
    let mut line_skip: usize = 0;
    loop {
        line += 1;
        let Some(text) = read_line(&mut r, path, line)? else {
            // A header with a detached data file may end without a blank line.
            if data_file.is_some() {
                break;
            }
            return Err(Error::file(
                path,
                line,
                "the header ends without a blank line before the data",
            ));
        };
        if text.is_empty() {
            break;
        }
        if text.starts_with('#') {
            continue;
        }
        let bad = |msg: String| Error::file(path, line, msg);
        // `key:=value` lines are key/value pairs, free text for applications.
        if let Some(k) = text.find(":=")
            && !text[..k].contains(": ")
        {
            continue;
        }
        let Some((key, value)) = text.split_once(": ") else {
            return Err(bad(format!("`{text}` is not a `field: value` line")));
        };
        let value = value.trim();
        let number = |v: &str| -> Result<usize> {
            v.parse::<usize>()
                .map_err(|_| bad(format!("`{v}` is not a whole number")))
        };
        match key.trim() {
            "type" => {
                kind = Some(Kind::parse(value).ok_or_else(|| {
                    bad(format!(
                        "unsupported sample type `{value}` (integers, float, double)"
                    ))
                })?)
            }
            "dimension" => {
                let d = number(value)?;
                if d == 0 || d > 16 {
                    return Err(bad(format!("dimension {d} (1 to 16 supported)")));
                }
                dim = Some((d, line));
            }
            "sizes" => {
                let v = value
                    .split_whitespace()
                    .map(number)
                    .collect::<Result<Vec<usize>>>()?;
                if v.contains(&0) {
                    return Err(bad("sizes must be positive".into()));
                }
                sizes = Some((v, line));
            }
            "encoding" => {
                encoding = Some(match value {
                    "raw" => Encoding::Raw,
                    "gzip" | "gz" => Encoding::Gzip,
                    "ascii" | "text" | "txt" => Encoding::Ascii,
                    _ => {
                        return Err(bad(format!(
                            "unsupported encoding `{value}` (raw, gzip, ascii)"
                        )));
                    }
                })
            }
            "endian" => {
                big = Some(match value {
                    "little" => false,
                    "big" => true,
                    _ => return Err(bad(format!("endian `{value}`: little or big"))),
                })
            }
            "space directions" => {
                dirs = Some((
                    vectors(value).map_err(|m| bad(format!("space directions: {m}")))?,
                    line,
                ))
            }
            "spacings" => {
                let v = value
                    .split_whitespace()
                    .map(|w| {
                        w.parse::<f64>()
                            .ok()
                            .filter(|v| v.is_finite())
                            .ok_or_else(|| bad(format!("spacing `{w}` is not a finite number")))
                    })
                    .collect::<Result<Vec<f64>>>()?;
                spacings = Some((v, line));
            }
            "space origin" => {
                let v = vector(value)
                    .map_err(|m| bad(format!("space origin: {m}")))?
                    .ok_or_else(|| bad("space origin cannot be `none`".into()))?;
                origin = Some((v, line));
            }
            "space dimension" => space_dim = Some((number(value)?, line)),
            "space" => {
                let d = match value {
                    "right-anterior-superior"
                    | "RAS"
                    | "left-anterior-superior"
                    | "LAS"
                    | "left-posterior-superior"
                    | "LPS"
                    | "scanner-xyz"
                    | "3D-right-handed"
                    | "3D-left-handed" => 3,
                    "right-anterior-superior-time"
                    | "RAST"
                    | "left-anterior-superior-time"
                    | "LAST"
                    | "left-posterior-superior-time"
                    | "LPST"
                    | "scanner-xyz-time"
                    | "3D-right-handed-time"
                    | "3D-left-handed-time" => 4,
                    _ => return Err(bad(format!("unknown space `{value}`"))),
                };
                space_dim = Some((d, line));
            }
            "data file" | "datafile" => data_file = Some((value.to_string(), line)),
            "byte skip" | "byteskip" => {
                byte_skip = value
                    .parse::<i64>()
                    .ok()
                    .filter(|&v| v >= -1)
                    .ok_or_else(|| bad(format!("byte skip `{value}`: a count or -1")))?
            }
            "line skip" | "lineskip" => line_skip = number(value)?,
            // Known fields without a bearing on the samples, and unknown ones, are ignored,
            // as Teem does with fields it does not use.
            _ => {}
        }
    }
    let header_end = line;
    let need = |what: &str| {
        Error::file(
            path,
            header_end,
            format!("the header has no `{what}` field"),
        )
    };
    let kind = kind.ok_or_else(|| need("type"))?;
    let (d, dim_line) = dim.ok_or_else(|| need("dimension"))?;
    let (nrrd_sizes, sizes_line) = sizes.ok_or_else(|| need("sizes"))?;
    let encoding = encoding.ok_or_else(|| need("encoding"))?;
    if nrrd_sizes.len() != d {
        return Err(Error::file(
            path,
            sizes_line,
            format!(
                "{} sizes for dimension {d} (line {dim_line})",
                nrrd_sizes.len()
            ),
        ));
    }
    if kind.size() > 1 && encoding != Encoding::Ascii && big.is_none() {
        return Err(need("endian"));
    }
    // Orientation, in NRRD's axis order first.
    let mut directions = None;
    if let Some((v, l)) = dirs {
        if v.len() != d {
            return Err(Error::file(
                path,
                l,
                format!("{} space directions for dimension {d}", v.len()),
            ));
        }
        let sd = space_dim
            .map(|s| s.0)
            .or_else(|| v.iter().flatten().next().map(Vec::len));
        let mut all = vec![];
        for (a, dir) in v.into_iter().enumerate() {
            let Some(dir) = dir else {
                return Err(Error::file(
                    path,
                    l,
                    format!(
                        "axis {a} has no space direction: only scalar images with a direction per axis are supported"
                    ),
                ));
            };
            if Some(dir.len()) != sd {
                return Err(Error::file(
                    path,
                    l,
                    format!(
                        "space direction of axis {a} has {} components, the space {}",
                        dir.len(),
                        sd.unwrap_or(0)
                    ),
                ));
            }
            all.push(dir);
        }
        if sd != Some(d) {
            return Err(Error::file(
                path,
                l,
                format!(
                    "a {d}-d image in a {}-d space is not supported",
                    sd.unwrap_or(0)
                ),
            ));
        }
        directions = Some(all);
    } else if let Some((v, l)) = spacings {
        if v.len() != d {
            return Err(Error::file(
                path,
                l,
                format!("{} spacings for dimension {d}", v.len()),
            ));
        }
        directions = Some(
            (0..d)
                .map(|a| (0..d).map(|i| if i == a { v[a] } else { 0.0 }).collect())
                .collect(),
        );
    }
    let origin = match origin {
        Some((o, l)) => {
            if o.len() != d {
                return Err(Error::file(
                    path,
                    l,
                    format!("space origin has {} components for a {d}-d image", o.len()),
                ));
            }
            if directions.is_none() {
                return Err(Error::file(
                    path,
                    l,
                    "space origin without space directions",
                ));
            }
            Some(o)
        }
        None => directions.as_ref().map(|_| vec![0.0; d]),
    };

    // Size check before any allocation of that size.
    let shape: Vec<usize> = nrrd_sizes.iter().rev().copied().collect();
    let count = shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
    let bytes = count.and_then(|c| c.checked_mul(kind.size() + kind.stored()));
    crate::runtime::memory::check(path, &shape, "Dense(Element(0.0))", bytes.map(|b| b as u64))?;
    let count = count.expect("checked by the memory check");

    // The data stream: the rest of this file, or the detached file.
    let mut detached;
    let data: &mut dyn BufRead = match &data_file {
        None => &mut r,
        Some((name, l)) => {
            if name.starts_with("LIST") || name.contains('%') {
                return Err(Error::file(
                    path,
                    *l,
                    "multi-file data (`LIST` or a format) is not supported",
                ));
            }
            let Some(dir) = dir else {
                return Err(Error::file(
                    path,
                    *l,
                    "a detached data file needs the header's folder",
                ));
            };
            let p = dir.join(name);
            let f = std::fs::File::open(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
            detached = std::io::BufReader::new(f);
            &mut detached
        }
    };
    for k in 0..line_skip {
        let mut sink = vec![];
        let n = (&mut *data)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut sink)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            return Err(Error::file(
                path,
                0,
                format!("the data ends in line skip {k}"),
            ));
        }
    }
    let want = count * kind.size();
    let short = |got: usize| {
        Error::file(
            path,
            0,
            format!("the data has {got} bytes, the header's sizes need {want}"),
        )
    };
    let read_exact = |src: &mut dyn Read| -> Result<Vec<u8>> {
        // Grown as bytes arrive, not reserved from the header: a short file claiming a size
        // within the memory limit costs only what it holds.
        let mut buf = Vec::new();
        src.take(want as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::file(path, 0, format!("reading the data: {e}")))?;
        if buf.len() < want {
            return Err(short(buf.len()));
        }
        Ok(buf)
    };
    let values = match encoding {
        Encoding::Raw => {
            if byte_skip == -1 {
                // The data are the file's last bytes.
                let mut all = vec![];
                data.take(crate::runtime::memory::max_memory().unwrap_or(u64::MAX))
                    .read_to_end(&mut all)
                    .map_err(|e| Error::io(path, e))?;
                if all.len() < want {
                    return Err(short(all.len()));
                }
                kind.decode(&all[all.len() - want..], big == Some(true))
            } else {
                std::io::copy(
                    &mut (&mut *data).take(byte_skip as u64),
                    &mut std::io::sink(),
                )
                .map_err(|e| Error::io(path, e))?;
                let buf = read_exact(data)?;
                kind.decode(&buf, big == Some(true))
            }
        }
        Encoding::Gzip => {
            if byte_skip == -1 {
                return Err(Error::file(path, 0, "byte skip -1 needs raw data"));
            }
            std::io::copy(
                &mut (&mut *data).take(byte_skip as u64),
                &mut std::io::sink(),
            )
            .map_err(|e| Error::io(path, e))?;
            let mut gz = flate2::bufread::MultiGzDecoder::new(data);
            let buf = read_exact(&mut gz)?;
            kind.decode(&buf, big == Some(true))
        }
        Encoding::Ascii => {
            // Text is at most a few dozen bytes per sample; read no more than that bound.
            let mut text = String::new();
            data.take((want as u64).saturating_mul(40).saturating_add(1 << 20))
                .read_to_string(&mut text)
                .map_err(|_| Error::file(path, 0, "ascii data is not text"))?;
            let words: Vec<&str> = text.split_whitespace().take(count + 1).collect();
            if words.len() < count {
                return Err(Error::file(
                    path,
                    0,
                    format!(
                        "{} samples in the ascii data, the sizes need {count}",
                        words.len()
                    ),
                ));
            }
            kind.parse_text(&words[..count]).ok_or_else(|| {
                Error::file(
                    path,
                    0,
                    "an ascii sample is not a number of the header's type",
                )
            })?
        }
    };
    Ok(Nrrd {
        data: DenseData { shape, values },
        directions: directions.map(|v| v.into_iter().rev().collect()),
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn read(bytes: &[u8]) -> Result<Nrrd> {
        read_nrrd(Cursor::new(bytes.to_vec()), "img.nrrd", None)
    }

    fn header(fields: &str) -> Vec<u8> {
        format!("NRRD0004\n# made by a test\n{fields}\n\n").into_bytes()
    }

    #[test]
    fn raw_little_and_big_endian_with_orientation() {
        let mut f = header(
            "type: short\ndimension: 2\nsizes: 3 2\nendian: big\nencoding: raw\nspace dimension: 2\nspace directions: (0.5,0) (0, 2)\nspace origin: (1,-1)\nkey:=value",
        );
        for v in [1i16, -2, 3, 4, 5, -6] {
            f.extend(v.to_be_bytes());
        }
        let n = read(&f).unwrap();
        // Row-major: NRRD's fastest axis (size 3) is the last index.
        assert_eq!(n.data.shape, vec![2, 3]);
        assert_eq!(n.data.values, Buffer::I32(vec![1, -2, 3, 4, 5, -6].into()));
        assert_eq!(n.directions, Some(vec![vec![0.0, 2.0], vec![0.5, 0.0]]));
        assert_eq!(n.origin, Some(vec![1.0, -1.0]));
        let mut f = header(
            "type: double\ndimension: 1\nsizes: 2\nendian: little\nencoding: raw\nspacings: 0.25",
        );
        f.extend(1.5f64.to_le_bytes());
        f.extend((-2.0f64).to_le_bytes());
        let n = read(&f).unwrap();
        assert_eq!(n.data.values, Buffer::F64(vec![1.5, -2.0].into()));
        assert_eq!(n.directions, Some(vec![vec![0.25]]));
        assert_eq!(n.origin, Some(vec![0.0]));
    }

    #[test]
    fn gzip_and_ascii() {
        let mut f =
            header("type: float\ndimension: 3\nsizes: 2 1 2\nendian: little\nencoding: gzip");
        let mut gz = flate2::write::GzEncoder::new(vec![], flate2::Compression::default());
        for v in [1.0f32, 2.0, 3.0, 4.0] {
            gz.write_all(&v.to_le_bytes()).unwrap();
        }
        f.extend(gz.finish().unwrap());
        let n = read(&f).unwrap();
        assert_eq!(n.data.shape, vec![2, 1, 2]);
        assert_eq!(n.data.values, Buffer::F32(vec![1.0, 2.0, 3.0, 4.0].into()));
        let mut f = header("type: uchar\ndimension: 2\nsizes: 2 2\nencoding: ascii");
        f.extend(b"1 2\n3 255\n");
        assert_eq!(
            read(&f).unwrap().data.values,
            Buffer::U8(vec![1, 2, 3, 255].into())
        );
    }

    #[test]
    fn detached_data() {
        let dir = std::env::temp_dir().join(format!("tessera-nrrd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("d.raw"), [9u8, 0, 7, 1, 2]).unwrap();
        std::fs::write(
            dir.join("d.nhdr"),
            "NRRD0004\ntype: uint8\ndimension: 2\nsizes: 2 2\nencoding: raw\nbyte skip: 1\ndata file: d.raw\n",
        )
        .unwrap();
        let n = read_nrrd_file(&dir.join("d.nhdr")).unwrap();
        assert_eq!(n.data.values, Buffer::U8(vec![0, 7, 1, 2].into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn err(bytes: &[u8]) -> (usize, String) {
        match read(bytes) {
            Err(Error::File { path, line, msg }) => {
                assert_eq!(path, "img.nrrd");
                (line, msg)
            }
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn bad_headers_name_their_line() {
        assert_eq!(err(b"P5\n").0, 1);
        let (l, m) = err(&header("type: quaternion\ndimension: 1"));
        assert_eq!(l, 3);
        assert!(m.contains("quaternion"), "{m}");
        let (l, m) = err(&header(
            "type: float\ndimension: 2\nsizes: 3\nencoding: raw\nendian: little",
        ));
        assert_eq!(l, 5);
        assert!(m.contains("1 sizes for dimension 2"), "{m}");
        let (l, m) = err(&header(
            "type: float\ndimension: 1\nsizes: 3\nencoding: raw",
        ));
        assert!(m.contains("endian") && l == 7, "{l} {m}");
        let (l, _) = err(&header(
            "type: uchar\ndimension: 1\nsizes: 1\nencoding: bzip2",
        ));
        assert_eq!(l, 6);
        let (l, m) = err(&header(
            "type: uchar\ndimension: 2\nsizes: 1 1\nencoding: raw\nspace directions: none (1,0)",
        ));
        assert_eq!(l, 7);
        assert!(m.contains("axis 0"), "{m}");
        assert_eq!(err(&header("type: uchar\nbogus line")).0, 4);
        // Short data.
        let mut f = header("type: uchar\ndimension: 1\nsizes: 4\nencoding: raw");
        f.extend([1, 2]);
        assert!(err(&f).1.contains("2 bytes"));
    }

    #[test]
    fn huge_sizes_are_refused_before_allocating() {
        let f = header(
            "type: double\ndimension: 3\nsizes: 100000 100000 100000\nendian: little\nencoding: raw",
        );
        assert!(matches!(read(&f), Err(Error::Memory { .. })));
        let f = header(
            "type: double\ndimension: 3\nsizes: 18446744073709551615 2 2\nendian: little\nencoding: raw",
        );
        assert!(matches!(read(&f), Err(Error::Memory { bytes: None, .. })));
    }
}

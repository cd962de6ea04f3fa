//! NumPy `.npy`: a magic string, a version, a Python-literal header dict (`descr`,
//! `fortran_order`, `shape`) and the raw array. Versions 1.0, 2.0 and 3.0 are read (they differ
//! only in the header length field and encoding); 1.0 is written, as `np.save` does.

use super::{DenseData, element_count, write_err};
use crate::error::{Error, Result};
use crate::runtime::Buffer;
use crate::types::ElemType;
use std::io::{Read, Write};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Byte order of the array data.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Order {
    Little,
    Big,
}

/// The element type and byte order of a `descr` string such as `<f8`, `|b1` or `?`.
fn parse_descr(descr: &str) -> Option<(ElemType, Order)> {
    if descr == "?" {
        return Some((ElemType::Bool, Order::Little));
    }
    let (order, code) = match descr.as_bytes().first()? {
        b'<' => (Some(Order::Little), descr.get(1..)?),
        b'>' => (Some(Order::Big), descr.get(1..)?),
        b'|' | b'=' => (None, descr.get(1..)?),
        _ => (None, descr),
    };
    let ty = match code {
        "f8" => ElemType::F64,
        "f4" => ElemType::F32,
        "i8" => ElemType::I64,
        "i4" => ElemType::I32,
        "u8" => ElemType::U64,
        "i1" => ElemType::I8,
        "u1" => ElemType::U8,
        "b1" | "?" => ElemType::Bool,
        _ => return None,
    };
    // `=` and a missing prefix mean native order; single bytes have none.
    let native = if cfg!(target_endian = "big") {
        Order::Big
    } else {
        Order::Little
    };
    Some((ty, order.unwrap_or(native)))
}

fn descr_of(ty: ElemType) -> &'static str {
    match ty {
        ElemType::F64 => "<f8",
        ElemType::F32 => "<f4",
        ElemType::I64 => "<i8",
        ElemType::I32 => "<i4",
        ElemType::U64 => "<u8",
        ElemType::I8 => "|i1",
        ElemType::U8 => "|u1",
        ElemType::Bool => "|b1",
        ElemType::Limit => unreachable!("no buffer holds limit points"),
    }
}

/// A value of the header dict.
#[derive(Debug, PartialEq)]
enum Lit {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A parser for the small Python-literal subset `np.save` writes in the header.
struct HeaderParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl HeaderParser<'_> {
    fn skip_ws(&mut self) {
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_whitespace())
        {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", c as char, self.pos))
        }
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at byte {}", self.pos)),
        };
        self.pos += 1;
        let start = self.pos;
        while let Some(&c) = self.s.get(self.pos) {
            if c == quote {
                let text = self.s.get(start..self.pos).unwrap_or_default();
                self.pos += 1;
                return Ok(String::from_utf8_lossy(text).into_owned());
            }
            self.pos += 1;
        }
        Err("unterminated string".into())
    }

    fn word(&mut self) -> &[u8] {
        self.skip_ws();
        let start = self.pos;
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.pos += 1;
        }
        self.s.get(start..self.pos).unwrap_or_default()
    }

    fn value(&mut self) -> std::result::Result<Lit, String> {
        match self.peek() {
            Some(b'\'' | b'"') => self.string().map(Lit::Str),
            Some(b'(') => {
                self.pos += 1;
                let mut dims = vec![];
                while !self.eat(b')') {
                    let w = self.word();
                    // numpy writes `3L` in files made by Python 2.
                    let digits = w.strip_suffix(b"L").unwrap_or(w);
                    let n = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|t| t.parse::<usize>().ok())
                        .ok_or_else(|| format!("bad extent in shape at byte {}", self.pos))?;
                    dims.push(n);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(Lit::Tuple(dims))
            }
            _ => match self.word() {
                b"True" => Ok(Lit::Bool(true)),
                b"False" => Ok(Lit::Bool(false)),
                _ => Err(format!("unexpected value at byte {}", self.pos)),
            },
        }
    }

    fn dict(&mut self) -> std::result::Result<Vec<(String, Lit)>, String> {
        self.expect(b'{')?;
        let mut entries = vec![];
        while !self.eat(b'}') {
            let key = self.string()?;
            self.expect(b':')?;
            entries.push((key, self.value()?));
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        Ok(entries)
    }
}

/// Read exactly `buf.len()` bytes; `false` if the stream ends first.
fn read_full(r: &mut impl Read, buf: &mut [u8], path: &str) -> Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Read a `.npy` array into C order.
pub fn read_npy(mut r: impl Read, path: &str) -> Result<DenseData> {
    let bad = |msg: String| Error::file(path, 0, msg);
    let mut pre = [0u8; 8];
    if !read_full(&mut r, &mut pre, path)? || !pre.starts_with(MAGIC) {
        return Err(bad("not a NumPy .npy file (bad magic string)".into()));
    }
    let (major, minor) = (pre[6], pre[7]);
    let header_len = match major {
        1 => {
            let mut b = [0u8; 2];
            if !read_full(&mut r, &mut b, path)? {
                return Err(bad("truncated header".into()));
            }
            u16::from_le_bytes(b) as u64
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            if !read_full(&mut r, &mut b, path)? {
                return Err(bad("truncated header".into()));
            }
            u32::from_le_bytes(b) as u64
        }
        _ => return Err(bad(format!("unsupported .npy version {major}.{minor}"))),
    };
    let mut header = Vec::new();
    (&mut r)
        .take(header_len)
        .read_to_end(&mut header)
        .map_err(|e| Error::io(path, e))?;
    if (header.len() as u64) < header_len {
        return Err(bad("truncated header".into()));
    }
    let entries = HeaderParser { s: &header, pos: 0 }
        .dict()
        .map_err(|m| bad(format!("bad header: {m}")))?;
    let get = |k: &str| entries.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    let descr = match get("descr") {
        Some(Lit::Str(s)) => s.as_str(),
        Some(_) => {
            return Err(bad(
                "bad header: `descr` is not a string (structured arrays are not supported)".into(),
            ));
        }
        None => return Err(bad("bad header: no `descr`".into())),
    };
    let (ty, order) = parse_descr(descr).ok_or_else(|| {
        bad(format!(
            "unsupported dtype `{descr}` (supported: f8 f4 i8 i4 u8 i1 u1 b1)"
        ))
    })?;
    let fortran = match get("fortran_order") {
        Some(Lit::Bool(b)) => *b,
        Some(_) => {
            return Err(bad(
                "bad header: `fortran_order` is not True or False".into()
            ));
        }
        None => return Err(bad("bad header: no `fortran_order`".into())),
    };
    let shape = match get("shape") {
        Some(Lit::Tuple(s)) => s.clone(),
        Some(_) => return Err(bad("bad header: `shape` is not a tuple".into())),
        None => return Err(bad("bad header: no `shape`".into())),
    };
    let count = element_count(&shape, path, 0)?;
    let nbytes = count
        .checked_mul(ty.size())
        .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
    // The raw bytes and the decoded array are both held for a moment.
    crate::runtime::memory::check(
        path,
        &shape,
        "a dense array",
        (nbytes as u64).checked_mul(2),
    )?;
    // Grow with the data actually present rather than trusting the header's size.
    let mut data = Vec::with_capacity(nbytes.min(1 << 24));
    r.take(nbytes as u64)
        .read_to_end(&mut data)
        .map_err(|e| Error::io(path, e))?;
    if data.len() < nbytes {
        return Err(bad(format!(
            "truncated data: shape {shape:?} of {descr} needs {nbytes} bytes, the file has {}",
            data.len()
        )));
    }
    let mut values = decode(&data, ty, order);
    check_u64(&values, &shape, fortran, path)?;
    if fortran && shape.len() > 1 {
        values = fortran_to_c(&values, &shape);
    }
    Ok(DenseData { shape, values })
}

/// Integers are computed as i64 (see `types`), so a `u64` of 2^63 or more would be read as a
/// negative number: refuse it, naming the element.
fn check_u64(values: &Buffer, shape: &[usize], fortran: bool, path: &str) -> Result<()> {
    let Buffer::U64(v) = values else {
        return Ok(());
    };
    let Some(k) = v.iter().position(|&x| x > i64::MAX as u64) else {
        return Ok(());
    };
    // The element's index, unravelled in the file's order.
    let mut idx = vec![0usize; shape.len()];
    let mut r = k;
    let dims: Vec<usize> = if fortran {
        (0..shape.len()).collect()
    } else {
        (0..shape.len()).rev().collect()
    };
    for d in dims {
        let n = shape[d].max(1);
        idx[d] = r % n;
        r /= n;
    }
    Err(Error::file(
        path,
        0,
        format!(
            "element {idx:?} is {}: u64 values from 2^63 on do not fit the i64 integers \
             are computed in",
            v[k]
        ),
    ))
}

fn decode(data: &[u8], ty: ElemType, order: Order) -> Buffer {
    macro_rules! words {
        ($t:ty, $n:expr) => {
            data.chunks_exact($n)
                .map(|c| {
                    let mut b = [0u8; $n];
                    b.copy_from_slice(c);
                    match order {
                        Order::Little => <$t>::from_le_bytes(b),
                        Order::Big => <$t>::from_be_bytes(b),
                    }
                })
                .collect()
        };
    }
    match ty {
        ElemType::F64 => Buffer::F64(words!(f64, 8)),
        ElemType::F32 => Buffer::F32(words!(f32, 4)),
        ElemType::I64 => Buffer::I64(words!(i64, 8)),
        ElemType::I32 => Buffer::I32(words!(i32, 4)),
        ElemType::U64 => Buffer::U64(words!(u64, 8)),
        ElemType::I8 => Buffer::I8(data.iter().map(|&b| b as i8).collect()),
        ElemType::U8 => Buffer::U8(data.to_vec().into()),
        ElemType::Bool => Buffer::Bool(data.iter().map(|&b| b != 0).collect()),
        ElemType::Limit => unreachable!("`parse_descr` gives no limit type"),
    }
}

/// Reorder column-major values of `shape` into row-major order.
fn fortran_to_c(values: &Buffer, shape: &[usize]) -> Buffer {
    let n = values.len();
    // Stride of each dimension in the column-major source.
    let mut strides = vec![1usize; shape.len()];
    for d in 1..shape.len() {
        strides[d] = strides[d - 1] * shape[d - 1];
    }
    let mut out = Buffer::new(values.elem());
    out.reserve(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let src: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.push(values.get(src));
        // Advance the row-major counter: last dimension fastest.
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Write a C-order array as a version 1.0 `.npy` (2.0 if the header does not fit in 65535
/// bytes), the header padded so the data starts 64-byte aligned, as numpy does.
pub fn write_npy(w: &mut dyn Write, d: &DenseData) -> Result<()> {
    let count = d.shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
    if count != Some(d.values.len()) {
        return Err(Error::Usage(format!(
            "an array of shape {:?} needs {} values, found {}",
            d.shape,
            count.map_or("too many".to_string(), |c| c.to_string()),
            d.values.len()
        )));
    }
    let shape = match d.shape.as_slice() {
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_of(d.values.elem())
    );
    let header = |prefix: usize| {
        // Pad with spaces and end with a newline so magic + header is a multiple of 64.
        let unpadded = prefix + dict.len() + 1;
        let pad = (64 - unpadded % 64) % 64;
        format!("{dict}{}\n", " ".repeat(pad))
    };
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    let h1 = header(10);
    if let Ok(len) = u16::try_from(h1.len()) {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(h1.as_bytes());
    } else {
        let h2 = header(12);
        let len = u32::try_from(h2.len())
            .map_err(|_| Error::Usage("array header too large for .npy".into()))?;
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(h2.as_bytes());
    }
    w.write_all(&out).map_err(write_err)?;
    let mut chunk = Vec::with_capacity(1 << 16);
    macro_rules! emit {
        ($v:expr, $f:expr) => {
            for part in $v.chunks(4096) {
                chunk.clear();
                for &x in part {
                    chunk.extend_from_slice(&$f(x));
                }
                w.write_all(&chunk).map_err(write_err)?;
            }
        };
    }
    match &d.values {
        Buffer::F64(v) => emit!(v, f64::to_le_bytes),
        Buffer::F32(v) => emit!(v, f32::to_le_bytes),
        Buffer::I64(v) => emit!(v, i64::to_le_bytes),
        Buffer::I32(v) => emit!(v, i32::to_le_bytes),
        Buffer::U64(v) => emit!(v, u64::to_le_bytes),
        Buffer::I8(v) => emit!(v, i8::to_le_bytes),
        Buffer::U8(v) => emit!(v, u8::to_le_bytes),
        Buffer::Bool(v) => emit!(v, |b: bool| [b as u8]),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(d: &DenseData) -> Vec<u8> {
        let mut out = Vec::new();
        write_npy(&mut out, d).unwrap();
        assert_eq!(&read_npy(&out[..], "t.npy").unwrap(), d);
        out
    }

    fn err(bytes: &[u8], needle: &str) {
        match read_npy(bytes, "t.npy") {
            Err(Error::File { path, line, msg }) => {
                assert_eq!((path.as_str(), line), ("t.npy", 0));
                assert!(msg.contains(needle), "`{msg}` should mention `{needle}`");
            }
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    /// Bytes of `np.save(f, np.arange(6, dtype='<i8').reshape(2, 3))`.
    fn numpy_arange() -> Vec<u8> {
        let dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }";
        let mut header = dict.to_string();
        while header.len() < 128 - 10 - 1 {
            header.push(' ');
        }
        header.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        for i in 0..6i64 {
            b.extend_from_slice(&i.to_le_bytes());
        }
        b
    }

    #[test]
    fn reads_numpy_output() {
        let bytes = numpy_arange();
        assert_eq!(bytes.len(), 128 + 48);
        let d = read_npy(&bytes[..], "t.npy").unwrap();
        assert_eq!(d.shape, vec![2, 3]);
        assert_eq!(d.values, Buffer::I64(vec![0, 1, 2, 3, 4, 5].into()));
    }

    #[test]
    fn writes_what_numpy_writes() {
        let d = DenseData {
            shape: vec![2, 3],
            values: Buffer::I64((0..6).collect()),
        };
        assert_eq!(round_trip(&d), numpy_arange());
    }

    #[test]
    fn every_dtype_round_trips() {
        let cases = [
            Buffer::F64(vec![0.1, -2.5, f64::INFINITY, 1e-300, 0.0, -0.0].into()),
            Buffer::F32(vec![0.1, -2.5, f32::MAX, 1e-30, 0.0, 7.0].into()),
            Buffer::I64(vec![i64::MIN, -1, 0, 1, i64::MAX, 5].into()),
            Buffer::I32(vec![i32::MIN, -1, 0, 1, i32::MAX, 5].into()),
            Buffer::U64(vec![0, 1, i64::MAX as u64, 3, 4, 5].into()),
            Buffer::I8(vec![-128, -1, 0, 1, 127, 5].into()),
            Buffer::U8(vec![0, 1, 255, 3, 4, 5].into()),
            Buffer::Bool(vec![true, false, true, true, false, false].into()),
        ];
        for values in cases {
            for shape in [vec![6], vec![2, 3], vec![1, 3, 2]] {
                let bytes = round_trip(&DenseData {
                    shape,
                    values: values.clone(),
                });
                let data_len = values.len() * values.elem().size();
                assert_eq!((bytes.len() - data_len) % 64, 0, "header alignment");
            }
        }
        // Scalars and empty arrays.
        round_trip(&DenseData {
            shape: vec![],
            values: Buffer::F64(vec![4.5].into()),
        });
        round_trip(&DenseData {
            shape: vec![0, 3],
            values: Buffer::I32(vec![].into()),
        });
    }

    #[test]
    fn u64_beyond_i64_is_refused_naming_the_element() {
        let mut out = Vec::new();
        let d = DenseData {
            shape: vec![2, 2],
            values: Buffer::U64(vec![0, 1, u64::MAX, 3].into()),
        };
        write_npy(&mut out, &d).unwrap();
        match read_npy(&out[..], "u.npy") {
            Err(e @ Error::File { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.starts_with("u.npy: element [1, 0] is 18446744073709551615"),
                    "{msg}"
                );
            }
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn a_header_larger_than_the_memory_limit_is_refused_before_reading() {
        // 10^8 x 10^8 f64 claimed by a header with no data behind it.
        if crate::runtime::memory::available().is_none() {
            eprintln!("skipping: no /proc/meminfo, so no memory limit by default");
            return;
        }
        let bytes = make(
            1,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 100000000), }",
            &[],
        );
        match read_npy(&bytes[..], "big.npy") {
            Err(Error::Memory { tensor, shape, .. }) => {
                assert_eq!(tensor, "big.npy");
                assert_eq!(shape, vec![100_000_000, 100_000_000]);
            }
            other => panic!("expected a memory error, got {other:?}"),
        }
    }

    #[test]
    fn header_shapes_and_descr() {
        let mut out = Vec::new();
        let d = DenseData {
            shape: vec![3],
            values: Buffer::Bool(vec![true; 3].into()),
        };
        write_npy(&mut out, &d).unwrap();
        let text = String::from_utf8_lossy(&out[10..]).into_owned();
        assert!(
            text.starts_with("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"),
            "{text}"
        );
    }

    /// A hand-made file with the given header dict and data bytes (version 1.0 or 2.0).
    fn make(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
        let mut b = b"\x93NUMPY".to_vec();
        b.extend_from_slice(&[version, 0]);
        let header = format!("{dict}\n");
        if version == 1 {
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn fortran_order_big_endian_and_version_2() {
        // Column-major [[1, 2, 3], [4, 5, 6]] is 1 4 2 5 3 6.
        let data: Vec<u8> = [1i32, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let f = make(
            2,
            "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3)}",
            &data,
        );
        let d = read_npy(&f[..], "t.npy").unwrap();
        assert_eq!(d.values, Buffer::I32(vec![1, 2, 3, 4, 5, 6].into()));
        // A 3-d Fortran array: element (i, j, k) at i + 2j + 4k.
        let data: Vec<u8> = (0..8u8).collect();
        let f = make(
            3,
            "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 2, 2)}",
            &data,
        );
        let d = read_npy(&f[..], "t.npy").unwrap();
        assert_eq!(d.values, Buffer::U8(vec![0, 4, 2, 6, 1, 5, 3, 7].into()));
        let data: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        let f = make(
            1,
            "{\"descr\": \">f8\", \"shape\": (2,), \"fortran_order\": False}",
            &data,
        );
        assert_eq!(
            read_npy(&f[..], "t.npy").unwrap().values,
            Buffer::F64(vec![1.5, -2.0].into())
        );
        let f = make(
            1,
            "{'descr': '?', 'fortran_order': False, 'shape': (2,)}",
            &[0, 1],
        );
        assert_eq!(
            read_npy(&f[..], "t.npy").unwrap().values,
            Buffer::Bool(vec![false, true].into())
        );
    }

    #[test]
    fn malformed_files_are_errors() {
        err(b"", "magic");
        err(b"PK\x03\x04zipfile", "magic");
        err(b"\x93NUMPY\x04\x00\x00\x00", "version 4.0");
        err(b"\x93NUMPY\x01\x00\x50\x00{'descr'", "truncated header");
        let good = numpy_arange();
        err(&good[..good.len() - 1], "truncated data");
        err(&good[..128], "truncated data");
        let f = |dict: &str| make(1, dict, &[0; 16]);
        err(
            &f("{'descr': '<c16', 'fortran_order': False, 'shape': (1,)}"),
            "<c16",
        );
        err(&f("{'descr': '<f8', 'shape': (1,)}"), "fortran_order");
        err(&f("{'descr': '<f8', 'fortran_order': False}"), "shape");
        err(&f("{'fortran_order': False, 'shape': (1,)}"), "descr");
        err(
            &f("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,)}"),
            "header",
        );
        err(
            &f("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}"),
            "shape",
        );
        err(
            &f("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,)}"),
            "header",
        );
        err(&f("not a dict"), "bad header");
        err(
            &f("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999)}"),
            "too large",
        );
    }

    #[test]
    fn writer_checks_the_value_count() {
        let d = DenseData {
            shape: vec![2, 2],
            values: Buffer::F64(vec![1.0].into()),
        };
        assert!(matches!(
            write_npy(&mut Vec::new(), &d),
            Err(Error::Usage(_))
        ));
    }
}

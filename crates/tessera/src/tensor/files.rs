//! Reading tensors from files into a chosen format, and writing them by file extension.

use crate::error::{Error, Result};
use crate::io::{self, CooData, DenseData, FileData};
use crate::levels::format::Coord;
use crate::levels::{Format, LevelKind};
use crate::runtime::Buffer;
use crate::semantics::frame::Orientation;
use crate::tensor::Tensor;
use crate::types::{Class, ElemType, Scalar};
use std::path::Path;

/// Read a tensor file and store it in `format` (or the default for its kind of file). Float
/// values loaded into an integer format must convert exactly (1.0 into `i64` does, 1.5 is an
/// error naming the entry; into bool, nonzero is true), and a tensor too large for the memory
/// limit is refused before it is built.
///
/// Two kinds of file give tensors with real-valued dimensions: a BED file (`.bed`,
/// `.bed.gz`) is `B[chrom, id, x]` (see [`bed_tensor`]), and an `N × k` float `.npy` loaded
/// into a format with `k` real levels above one integer level is the point set
/// `P[x1, ..., xk, id]`, one pinpoint per row.
pub fn load_tensor(path: &str, format: Option<&str>) -> Result<Tensor> {
    Ok(load_tensors(&[(path, format)])?.remove(0))
}

/// [`load_tensor`] for several files at once. The BED files among them share one table of
/// chromosome names (numbered in order of first appearance across the files, in the order
/// given), so `chrom` means the same chromosome in each of their tensors and their first
/// dimensions are equal.
pub fn load_tensors(files: &[(&str, Option<&str>)]) -> Result<Vec<Tensor>> {
    Ok(load_inputs(files)?.into_iter().map(|(t, _)| t).collect())
}

/// Whether `path` names a NRRD image (`.nrrd`, or a detached header `.nhdr`).
pub fn is_nrrd(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".nrrd") || lower.ends_with(".nhdr")
}

/// [`load_tensors`], with the world orientation of each NRRD image whose header gives space
/// directions (`None` for every other file): the frame its fields probe in
/// (`transforms::fields::with_frames`).
pub fn load_inputs(files: &[(&str, Option<&str>)]) -> Result<Vec<(Tensor, Option<Orientation>)>> {
    let is_bed = |path: &str| {
        let lower = path.to_ascii_lowercase();
        lower.ends_with(".bed") || lower.ends_with(".bed.gz")
    };
    let mut names = io::bed::ChromNames::new();
    let mut records = vec![];
    for (path, _) in files {
        records.push(match is_bed(path) {
            true => Some(io::bed::read_bed(Path::new(path), &mut names)?),
            false => None,
        });
    }
    files
        .iter()
        .zip(records)
        .map(|(&(path, format), records)| match records {
            Some(records) => {
                let format = match format {
                    Some(f) => Format::parse(f, Some(3))
                        .map_err(|e| Error::Usage(format!("{path}: {e}")))?,
                    None => Format::parse(BED_FORMAT, None)?,
                };
                let t = bed_tensor(&records, names.len(), &format).map_err(|e| match e {
                    Error::Usage(m) => Error::Usage(format!("{path}: {m}")),
                    e => e.named(path),
                })?;
                Ok((t, None))
            }
            None if is_nrrd(path) => {
                let n = io::nrrd::read_nrrd_file(Path::new(path))?;
                let orientation = match (n.directions, n.origin) {
                    (Some(directions), Some(origin)) => Some(Orientation { directions, origin }),
                    _ => None,
                };
                Ok((
                    tensor_from_data(FileData::Dense(n.data), format, path)?,
                    orientation,
                ))
            }
            None => Ok((
                tensor_from_data(io::read_file(Path::new(path))?, format, path)?,
                None,
            )),
        })
        .collect()
}

/// The default format of a BED file's tensor `B[chrom, id, x]`: dense chromosomes, a sparse
/// list of record numbers, and each record's interval as a real run.
pub const BED_FORMAT: &str = "Dense(SparseList(SparseRunList(Pattern(), coord=f64)))";

/// The tensor `B[chrom, id, x]` of BED records: chrom is the 0-based rank of the chromosome
/// name in order of first appearance (`n_chroms` of them), id the record's 0-based number, and
/// x the half-open `[start, end)` (a zero-length record covers `[start - 1, end + 1)`, as
/// bedtools compares it); the value is `true` (or 1) on the interval.
pub fn bed_tensor(
    records: &[io::bed::BedRecord],
    n_chroms: usize,
    format: &Format,
) -> Result<Tensor> {
    use crate::tensor::pieces::{Piece, PieceCoord};
    let real = format.real_dims();
    if real != [false, false, true] {
        return Err(Error::Usage(format!(
            "a BED file is a tensor B[chrom, id, x] with a real-valued last dimension: its \
             format needs two integer levels and a `coord=f64` level, not {format}"
        )));
    }
    let one = Scalar::Bool(true).cast(format.elem());
    let pieces: Vec<Piece> = records
        .iter()
        .enumerate()
        .map(|(id, r)| {
            let (lo, hi) = r.span();
            (
                vec![
                    PieceCoord::Int(r.chrom as i64),
                    PieceCoord::Int(id as i64),
                    PieceCoord::right_open(lo as f64, hi as f64),
                ],
                one,
            )
        })
        .collect();
    Tensor::from_pieces(format, &[n_chroms, records.len(), 0], &pieces)
}

/// The point set `P[x1, ..., xk, id]` of an `N × k` array: row `id` is the pinpoint
/// `(x1, ..., xk)`, with the value `true` (or 1).
fn point_tensor(d: &DenseData, format: &Format, path: &str) -> Result<Tensor> {
    use crate::tensor::pieces::{Piece, PieceCoord};
    let real = format.real_dims();
    let k = real.iter().take_while(|&&r| r).count();
    if d.shape.len() != 2 || k != d.shape[1] || real.len() != k + 1 {
        return Err(Error::Usage(format!(
            "{path}: an N × k array loads into a format with k real levels above one integer \
             level (the point set P[x1, ..., xk, id]); this array is {:?} and the format {format}",
            d.shape
        )));
    }
    let one = Scalar::Bool(true).cast(format.elem());
    let values = d.values.converted(ElemType::F64);
    let mut pieces: Vec<Piece> = Vec::with_capacity(d.shape[0]);
    for id in 0..d.shape[0] {
        let mut coords = Vec::with_capacity(k + 1);
        for j in 0..k {
            let x = values.get(id * k + j).as_f64();
            if !x.is_finite() {
                return Err(Error::file(
                    path,
                    0,
                    format!("row {id}, column {j} is {x}: a point needs finite coordinates"),
                ));
            }
            coords.push(PieceCoord::point(x));
        }
        coords.push(PieceCoord::Int(id as i64));
        pieces.push((coords, one));
    }
    let mut shape = vec![0; k];
    shape.push(d.shape[0]);
    Tensor::from_pieces(format, &shape, &pieces).map_err(|e| e.named(path))
}

/// Store what a reader returned in `format` (or the default for its kind of file); `path`
/// names the source in errors. [`load_tensor`] is [`io::read_file`] followed by this, so
/// readers given bytes (`io::mtx::read_mtx(&bytes[..], ..)`) reach the same tensors.
pub fn tensor_from_data(data: FileData, format: Option<&str>, path: &str) -> Result<Tensor> {
    let (rank, elem) = match &data {
        FileData::Coo(c) => (c.shape.len(), c.values.elem()),
        FileData::Dense(d) => (d.shape.len(), d.values.elem()),
    };
    // A point set's format has one more dimension than its array (`N × k` is `P[x.., id]`).
    let real = format.and_then(|f| Format::parse(f, None).ok().filter(Format::is_real));
    let format = match (real, format) {
        (Some(f), _) => f,
        (None, Some(f)) => {
            Format::parse(f, Some(rank)).map_err(|e| Error::Usage(format!("{path}: {e}")))?
        }
        (None, None) => default_format(&data, rank, elem),
    };
    if format.is_real() {
        return match data {
            FileData::Dense(d) if d.values.elem().class() == Class::Float => {
                point_tensor(&d, &format, path)
            }
            _ => Err(Error::Usage(format!(
                "{path}: a format with real-valued levels loads a BED file (.bed, .bed.gz) or \
                 an N × k float .npy point set, not this file"
            ))),
        };
    }
    let t = match data {
        FileData::Coo(c) => {
            let values = convert_values(&c.values, format.elem(), path, |k| {
                let at: Vec<String> = c.coords.iter().map(|d| (d[k] + 1).to_string()).collect();
                format!("the entry at ({}) (1-based, as in the file)", at.join(", "))
            })?;
            Tensor::from_coo(
                &format,
                &c.shape,
                &c.coords,
                &values,
                crate::tensor::add_duplicates,
            )
        }
        FileData::Dense(d) => {
            let values = convert_values(&d.values, format.elem(), path, |k| {
                format!("element {:?}", unravel(k, &d.shape))
            })?;
            Tensor::from_dense(&format, &d.shape, &values)
        }
    };
    t.map_err(|e| match e {
        Error::Tensor { msg, .. } => Error::file(path, 0, msg),
        e => e.named(path),
    })
}

/// The row-major index of the `k`-th element of an array of `shape`.
fn unravel(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        idx[d] = k % n;
        k /= n;
    }
    idx
}

/// `values` as element type `ty`; a float that does not survive the trip to an integer type
/// and back (1.5, 300.0 into `u8`, NaN) is an error naming the entry (`place(k)`).
fn convert_values(
    values: &Buffer,
    ty: ElemType,
    path: &str,
    place: impl Fn(usize) -> String,
) -> Result<Buffer> {
    if values.elem().class() == Class::Float && ty.class() == Class::Int {
        for k in 0..values.len() {
            let v = values.get(k);
            if v.cast(ty).cast(v.ty()) != v {
                return Err(Error::file(
                    path,
                    0,
                    format!(
                        "{} is {v}, which {ty} cannot hold exactly (load the file into a float \
                         format, e.g. Element(0.0))",
                        place(k)
                    ),
                ));
            }
        }
    }
    Ok(values.converted(ty))
}

fn default_format(data: &FileData, rank: usize, elem: ElemType) -> Format {
    match data {
        // Matrix Market files are sparse: CSR for matrices (a sparse last level otherwise).
        FileData::Coo(_) => {
            let fill = match elem {
                ElemType::Bool => LevelKind::Pattern,
                ElemType::F64 | ElemType::F32 => LevelKind::Element(Scalar::zero(ElemType::F64)),
                t => LevelKind::Element(Scalar::zero(t)),
            };
            // 4-byte coordinates and positions when the last dimension and the entry count
            // fit, as SciPy does: 12 bytes per CSR entry instead of 16.
            let fits = |n: usize| n <= i32::MAX as usize;
            let coord = match data {
                FileData::Coo(c)
                    if c.shape.last().is_none_or(|&n| fits(n)) && fits(c.values.len()) =>
                {
                    Coord::I32
                }
                _ => Coord::I64,
            };
            let mut levels = vec![LevelKind::Dense; rank.saturating_sub(1)];
            if rank > 0 {
                levels.push(LevelKind::SparseList { coord });
            }
            levels.push(fill);
            Format { levels }
        }
        FileData::Dense(_) => Format::dense(rank, Scalar::zero(elem)),
    }
}

/// What an output file's extension makes of a tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
enum OutKind {
    Npy,
    Mtx,
    Tns,
}

/// An output file checked and opened before the work that fills it: its extension is known,
/// its tensor's rank and size suit it, and its temporary file exists (so a directory that is
/// missing or not writable fails before any kernel runs). Write it with [`write_outputs`].
pub struct OutputFile {
    kind: OutKind,
    file: io::Staged,
}

/// Check that `path` names a file type tensors can be written to (`.npy`, `.mtx`, `.tns`).
pub fn check_output_type(path: &str) -> Result<()> {
    out_kind(path).map(|_| ())
}

fn out_kind(path: &str) -> Result<OutKind> {
    let ext = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    match ext {
        "npy" => Ok(OutKind::Npy),
        "mtx" => Ok(OutKind::Mtx),
        "tns" => Ok(OutKind::Tns),
        other => Err(Error::Usage(format!(
            "{path}: unknown output file type `.{other}` (use .npy, .mtx or .tns)"
        ))),
    }
}

impl OutputFile {
    /// An output for a tensor of this shape and element type (the fill gives the type).
    pub fn create(path: &str, shape: &[usize], fill: Scalar) -> Result<OutputFile> {
        let kind = out_kind(path)?;
        match kind {
            OutKind::Mtx if !matches!(shape.len(), 1 | 2) => {
                return Err(Error::Usage(format!(
                    "{path}: Matrix Market holds vectors and matrices, this tensor has rank {}",
                    shape.len()
                )));
            }
            // A .npy is dense whatever the tensor's format: its size is checked now.
            OutKind::Npy => {
                let dense = Format::dense(shape.len(), fill);
                let bytes = crate::memory::tensor_bytes(&dense, shape, 0);
                crate::memory::check(path, shape, &dense, bytes)?;
            }
            _ => {}
        }
        Ok(OutputFile {
            kind,
            file: io::Staged::create(Path::new(path))?,
        })
    }

    /// Write `t` into the temporary file (published by [`write_outputs`]).
    fn write(&mut self, t: &Tensor) -> Result<()> {
        let name = self.file.path().display().to_string();
        match self.kind {
            OutKind::Npy => {
                let d = DenseData {
                    shape: t.shape.clone(),
                    values: t.try_to_dense().map_err(|e| e.named(&name))?,
                };
                self.file.write(|w| io::npy::write_npy(w, &d))
            }
            OutKind::Mtx => {
                // A vector is an n x 1 matrix.
                let shape = match t.shape.as_slice() {
                    [n] => vec![*n, 1],
                    s => s.to_vec(),
                };
                if t.format.is_dense() {
                    let d = DenseData {
                        shape,
                        values: t.try_to_dense().map_err(|e| e.named(&name))?,
                    };
                    self.file.write(|w| io::mtx::write_mtx_array(w, &d))
                } else {
                    let mut c = to_coo(t);
                    if t.rank() == 1 {
                        c.coords.push(vec![0; c.values.len()]);
                        c.shape = shape;
                    }
                    self.file.write(|w| io::mtx::write_mtx_coo(w, &c))
                }
            }
            OutKind::Tns => {
                let c = to_coo(t);
                self.file.write(|w| io::tns::write_tns(w, &c))
            }
        }
    }
}

/// Write every output, then publish them all (each renamed over its path) or none: an error in
/// any write leaves every path as it was.
pub fn write_outputs(outputs: Vec<(OutputFile, &Tensor)>) -> Result<()> {
    let mut files = Vec::with_capacity(outputs.len());
    for (mut o, t) in outputs {
        o.write(t)?;
        files.push(o.file);
    }
    io::commit_all(files)
}

/// Write a tensor by the file's extension: `.npy` dense, `.mtx` a matrix (a vector as an n x 1
/// matrix), `.tns` any rank.
pub fn write_tensor(path: &str, t: &Tensor) -> Result<()> {
    let o = OutputFile::create(path, &t.shape, t.fill())?;
    write_outputs(vec![(o, t)])
}

/// Whether coordinate files keep the stored entries equal to the fill: yes when each entry is
/// stored on its own (sparse lists, hash maps, ...), so an explicitly stored zero survives a
/// round trip; no when the innermost level is Dense or some level stores runs, whose fill
/// coordinates are structure rather than entries.
fn keeps_stored_fills(f: &Format) -> bool {
    let runs = f.levels.iter().any(|l| {
        matches!(
            l,
            LevelKind::RunList { .. }
                | LevelKind::SparseRunList { .. }
                | LevelKind::SparseInterval { .. }
        )
    });
    let inner = f.levels.iter().rev().find(|l| !l.is_leaf());
    !runs && inner.is_some_and(|l| !matches!(l, LevelKind::Dense))
}

fn to_coo(t: &Tensor) -> CooData {
    let mut coords = vec![vec![]; t.rank()];
    let mut values = Buffer::new(t.elem());
    let fill = t.fill();
    let keep_fills = keeps_stored_fills(&t.format);
    t.for_each_stored(&mut |c, v| {
        if keep_fills || v != fill {
            for (d, &x) in c.iter().enumerate() {
                coords[d].push(x as i64);
            }
            values.push(v);
        }
    });
    CooData {
        shape: t.shape.clone(),
        coords,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn coordinate_files_keep_explicitly_stored_zeros() {
        let d = dir("zeros");
        let p = d.join("z.mtx");
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 0\n1 2 5\n2 2 0\n",
        )
        .unwrap();
        let t = load_tensor(p.to_str().unwrap(), None).unwrap();
        assert_eq!(t.countstored(), 3);
        for out in ["back.mtx", "back.tns"] {
            let q = d.join(out);
            write_tensor(q.to_str().unwrap(), &t).unwrap();
            let back = load_tensor(q.to_str().unwrap(), None).unwrap();
            assert_eq!(back.countstored(), 3, "{out}");
        }
        // A dense tensor written as coordinates lists only the entries that are not fill.
        let dense = t.to_format(&Format::dense(2, Scalar::F64(0.0))).unwrap();
        let q = d.join("dense.tns");
        write_tensor(q.to_str().unwrap(), &dense).unwrap();
        assert_eq!(
            load_tensor(q.to_str().unwrap(), None)
                .unwrap()
                .countstored(),
            1
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn vectors_are_written_as_n_by_1_matrices() {
        let d = dir("vec");
        let v = Tensor::from_coo(
            &Format::parse("SparseList(Element(0))", Some(1)).unwrap(),
            &[4],
            &[vec![1, 3]],
            &Buffer::I64(vec![7, -2].into()),
            |a, _| a,
        )
        .unwrap();
        let p = d.join("v.mtx");
        write_tensor(p.to_str().unwrap(), &v).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "%%MatrixMarket matrix coordinate integer general\n4 1 2\n2 1 7\n4 1 -2\n"
        );
        let dense = v.to_format(&Format::dense(1, Scalar::I64(0))).unwrap();
        write_tensor(p.to_str().unwrap(), &dense).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "%%MatrixMarket matrix array integer general\n4 1\n0\n7\n0\n-2\n"
        );
        // Read back, an n x 1 matrix.
        assert_eq!(
            load_tensor(p.to_str().unwrap(), None).unwrap().shape,
            vec![4, 1]
        );
        // Other ranks are refused before anything is written.
        let t3 = Tensor::empty(&Format::dense(3, Scalar::F64(0.0)), &[1, 1, 1]).unwrap();
        assert!(matches!(
            write_tensor(d.join("t.mtx").to_str().unwrap(), &t3),
            Err(Error::Usage(m)) if m.contains("rank 3")
        ));
        assert!(!d.join("t.mtx").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn floats_load_into_integer_formats_only_when_exact() {
        let d = dir("exact");
        let p = d.join("a.mtx");
        let path = p.to_str().unwrap();
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 2.0\n2 1 1.5\n",
        )
        .unwrap();
        let err = load_tensor(path, Some("Dense(SparseList(Element(0)))")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("a.mtx") && msg.contains("(2, 1)") && msg.contains("1.5"),
            "{msg}"
        );
        assert!(!msg.contains(":0:"), "{msg}");
        // Into bool, nonzero is true (graphs and masks are loaded that way).
        assert!(load_tensor(path, Some("Dense(SparseList(Element(false)))")).is_ok());
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 2.0\n2 1 -3\n",
        )
        .unwrap();
        let t = load_tensor(path, Some("Dense(SparseList(Element(0)))")).unwrap();
        assert_eq!(t.to_dense(), Buffer::I64(vec![2, 0, -3, 0].into()));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_dense_output_too_large_for_the_limit_is_refused_when_opened() {
        if crate::memory::available().is_none() {
            return;
        }
        let d = dir("big");
        let p = d.join("big.npy");
        let huge = [1usize << 30, 1 << 30];
        match OutputFile::create(p.to_str().unwrap(), &huge, Scalar::F64(0.0)) {
            Err(Error::Memory { shape, .. }) => assert_eq!(shape, huge.to_vec()),
            other => panic!("expected a memory error, got {:?}", other.map(|_| ())),
        }
        assert!(
            std::fs::read_dir(&d).unwrap().next().is_none(),
            "nothing created"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}

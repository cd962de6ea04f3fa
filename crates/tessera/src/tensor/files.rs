//! Reading tensors from files into a chosen format, and writing them by file extension.

use crate::error::{Error, Result};
use crate::io::{self, CooData, DenseData, FileData};
use crate::levels::{Format, LevelKind};
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use crate::types::{ElemType, Scalar};
use std::path::Path;

/// Read a tensor file and store it in `format` (or the default for its kind of file).
pub fn load_tensor(path: &str, format: Option<&str>) -> Result<Tensor> {
    let data = io::read_file(Path::new(path))?;
    let (rank, elem) = match &data {
        FileData::Coo(c) => (c.shape.len(), c.values.elem()),
        FileData::Dense(d) => (d.shape.len(), d.values.elem()),
    };
    let format = match format {
        Some(f) => {
            Format::parse(f, Some(rank)).map_err(|e| Error::Usage(format!("{path}: {e}")))?
        }
        None => default_format(&data, rank, elem),
    };
    let t = match data {
        FileData::Coo(c) => {
            let values = convert_buffer(&c.values, format.elem());
            Tensor::from_coo(
                &format,
                &c.shape,
                &c.coords,
                &values,
                crate::tensor::add_duplicates,
            )
        }
        FileData::Dense(d) => {
            Tensor::from_dense(&format, &d.shape, &convert_buffer(&d.values, format.elem()))
        }
    };
    t.map_err(|e| match e {
        Error::Tensor { msg, .. } => Error::file(path, 0, msg),
        e => e,
    })
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
            let mut levels = vec![LevelKind::Dense; rank.saturating_sub(1)];
            if rank > 0 {
                levels.push(LevelKind::SparseList);
            }
            levels.push(fill);
            Format { levels }
        }
        FileData::Dense(_) => Format::dense(rank, Scalar::zero(elem)),
    }
}

fn convert_buffer(b: &Buffer, ty: ElemType) -> Buffer {
    if b.elem() == ty {
        return b.clone();
    }
    let mut out = Buffer::new(ty);
    out.reserve(b.len());
    for k in 0..b.len() {
        out.push(b.get(k));
    }
    out
}

/// Write a tensor by the file's extension: `.npy` dense, `.mtx` 2-d, `.tns` any rank.
pub fn write_tensor(path: &str, t: &Tensor) -> Result<()> {
    let ext = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    match ext {
        "npy" => {
            let d = DenseData {
                shape: t.shape.clone(),
                values: t.to_dense(),
            };
            io::write_atomic(Path::new(path), |w| io::npy::write_npy(w, &d))
        }
        "mtx" => {
            if t.rank() != 2 {
                return Err(Error::Usage(format!(
                    "{path}: Matrix Market holds 2-d tensors, `{}` has rank {}",
                    path,
                    t.rank()
                )));
            }
            if t.format.is_dense() {
                let d = DenseData {
                    shape: t.shape.clone(),
                    values: t.to_dense(),
                };
                io::write_atomic(Path::new(path), |w| io::mtx::write_mtx_array(w, &d))
            } else {
                let c = to_coo(t);
                io::write_atomic(Path::new(path), |w| io::mtx::write_mtx_coo(w, &c))
            }
        }
        "tns" => {
            let c = to_coo(t);
            io::write_atomic(Path::new(path), |w| io::tns::write_tns(w, &c))
        }
        other => Err(Error::Usage(format!(
            "{path}: unknown output file type `.{other}` (use .npy, .mtx or .tns)"
        ))),
    }
}

fn to_coo(t: &Tensor) -> CooData {
    let mut coords = vec![vec![]; t.rank()];
    let mut values = Buffer::new(t.elem());
    let fill = t.fill();
    t.for_each_stored(&mut |c, v| {
        // Explicit fill values of sparse formats are not worth a line in a coordinate file.
        if v != fill {
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

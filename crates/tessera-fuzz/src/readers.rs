//! The file readers, given bytes: a file is either refused with an error, or its data is
//! consistent (as many coordinates as values, all inside the shape; as many dense values as
//! the shape has elements), reads back the same after being written (`.mtx`, `.npy`, `.tns`),
//! and loads into a tensor of the default format without panicking.

use crate::same_values;
use std::io::Cursor;
use tessera::backend::Interpreter;
use tessera::fields::kernel::Kernel;
use tessera::fields::probe::{Field, Wants};
use tessera::fields::{Image, Orientation};
use tessera::io::{CooData, DenseData, FileData, mtx, npy, nrrd, png, tns};
use tessera::tensor::files::tensor_from_data;

/// Tensors are built from what was read only up to this many elements in all dimensions but
/// the last (the default formats' dense levels): larger shapes claimed by a tiny file would
/// allocate that much, and refusing such sizes up front is the resource limits' job, not the
/// readers'.
const MAX_DENSE_PREFIX: usize = 1 << 16;

pub fn mtx(data: &[u8]) {
    let Ok(read) = mtx::read_mtx(data, "fuzz.mtx") else {
        return;
    };
    let mut out = vec![];
    match &read {
        FileData::Coo(c) => {
            check_coo(c, "mtx");
            mtx::write_mtx_coo(&mut out, c).expect("writing what was read");
        }
        FileData::Dense(d) => {
            check_dense(d, "mtx");
            mtx::write_mtx_array(&mut out, d).expect("writing what was read");
        }
    }
    let again = mtx::read_mtx(&out[..], "again.mtx")
        .unwrap_or_else(|e| panic!("the written file does not read back: {e}\n{}", show(&out)));
    let same = match (&read, &again) {
        // A pattern file cannot hold `false`, which the reader never produces.
        (FileData::Coo(a), FileData::Coo(b)) => same_coo(a, b),
        (FileData::Dense(a), FileData::Dense(b)) => same_dense(a, b),
        _ => false,
    };
    assert!(
        same,
        "written and read back, {read:?} became {again:?}\n{}",
        show(&out)
    );
    load(read);
}

pub fn npy(data: &[u8]) {
    let Ok(d) = npy::read_npy(data, "fuzz.npy") else {
        return;
    };
    check_dense(&d, "npy");
    let mut out = vec![];
    npy::write_npy(&mut out, &d).expect("writing what was read");
    let again = npy::read_npy(&out[..], "again.npy")
        .unwrap_or_else(|e| panic!("the written file does not read back: {e}"));
    assert!(
        same_dense(&d, &again),
        "written and read back, {d:?} became {again:?}"
    );
    load(FileData::Dense(d));
}

pub fn tns(data: &[u8]) {
    let Ok(c) = tns::read_tns(data, "fuzz.tns") else {
        return;
    };
    check_coo(&c, "tns");
    let mut out = vec![];
    tns::write_tns(&mut out, &c).expect("writing what was read");
    let again = tns::read_tns(&out[..], "again.tns")
        .unwrap_or_else(|e| panic!("the written file does not read back: {e}\n{}", show(&out)));
    assert!(
        same_coo(&c, &again),
        "written and read back, {c:?} became {again:?}\n{}",
        show(&out)
    );
    load(FileData::Coo(c));
}

/// Images whose header claims more pixels than this are skipped: the reader allocates the
/// whole image before decoding it, and bounding that (the `png` crate's limits and a memory
/// check) belongs to the resource limits.
const MAX_PNG_PIXELS: u64 = 1 << 24;

pub fn png(data: &[u8]) {
    if png_claims_too_much(data) {
        return;
    }
    let Ok(d) = png::read_png(Cursor::new(data), "fuzz.png") else {
        return;
    };
    check_dense(&d, "png");
    assert!(
        d.shape.len() == 2 && d.values.elem() == tessera::ElemType::U8,
        "an image reads as a 2-d u8 array, not {:?} of {:?}",
        d.shape,
        d.values.elem()
    );
    load(FileData::Dense(d));
}

/// A NRRD image: consistent data and orientation, and, when it makes a field (1 to 3
/// dimensions, an invertible orientation), a `tent` probe at its centre that is NaN exactly
/// when the centre's window is outside the image.
pub fn nrrd(data: &[u8]) {
    let Ok(n) = nrrd::read_nrrd(Cursor::new(data), "fuzz.nrrd", None) else {
        return;
    };
    check_dense(&n.data, "nrrd");
    let d = n.data.shape.len();
    if let Some(dirs) = &n.directions {
        assert!(
            dirs.len() == d && dirs.iter().all(|v| v.len() == d),
            "nrrd: directions {dirs:?} for a {d}-d image"
        );
        assert_eq!(n.origin.as_ref().map(Vec::len), Some(d), "nrrd: origin");
    }
    let orientation = match (n.directions, n.origin) {
        (Some(directions), Some(origin)) => Some(Orientation { directions, origin }),
        _ => None,
    };
    let Ok(image) = Image::new(
        n.data.shape.clone(),
        n.data.values,
        orientation,
        "fuzz.nrrd",
    ) else {
        return;
    };
    let centre: Vec<f64> = n
        .data
        .shape
        .iter()
        .map(|&s| (s as f64 - 1.0) / 2.0)
        .collect();
    let world = match &image.orientation {
        Some(o) => (0..d)
            .map(|i| o.origin[i] + (0..d).map(|a| o.directions[a][i] * centre[a]).sum::<f64>())
            .collect(),
        None => centre,
    };
    let mut field = Field::new(image, Kernel::named("tent").expect("a kernel"), "fuzz.nrrd")
        .expect("a valid image makes a field");
    let inside = field.inside(&world);
    let k = field
        .compile(&Interpreter::new(), Wants::order(0).expect("order 0"))
        .expect("a probe compiles");
    let v = field
        .probe(&k, &world)
        .expect("a probe runs")
        .value
        .expect("values were asked for")[0];
    if !inside {
        assert!(v.is_nan(), "nrrd: a probe outside gave {v}");
    }
}

/// Whether the `IHDR` chunk, which the PNG signature must be followed by, claims more than
/// [`MAX_PNG_PIXELS`].
fn png_claims_too_much(data: &[u8]) -> bool {
    let word = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    };
    match (word(16), word(20)) {
        (Some(w), Some(h)) => w * h > MAX_PNG_PIXELS,
        _ => false,
    }
}

fn check_coo(c: &CooData, what: &str) {
    assert!(
        c.coords.len() == c.shape.len() && c.coords.iter().all(|v| v.len() == c.values.len()),
        "{what}: {} coordinate lists of lengths {:?} for shape {:?} and {} values",
        c.coords.len(),
        c.coords.iter().map(Vec::len).collect::<Vec<_>>(),
        c.shape,
        c.values.len()
    );
    for (d, (v, &n)) in c.coords.iter().zip(&c.shape).enumerate() {
        if let Some(bad) = v.iter().find(|&&x| x < 0 || x as u64 >= n as u64) {
            panic!("{what}: coordinate {bad} of dimension {d} is outside 0..{n}");
        }
    }
}

fn check_dense(d: &DenseData, what: &str) {
    let count = d.shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
    assert!(
        count == Some(d.values.len()),
        "{what}: {} values for shape {:?}",
        d.values.len(),
        d.shape
    );
}

fn same_coo(a: &CooData, b: &CooData) -> bool {
    a.shape == b.shape && a.coords == b.coords && same_values(&a.values, &b.values)
}

fn same_dense(a: &DenseData, b: &DenseData) -> bool {
    a.shape == b.shape && same_values(&a.values, &b.values)
}

/// Store the data in its default format, when its dense prefix is small.
fn load(data: FileData) {
    let shape = match &data {
        FileData::Coo(c) => &c.shape,
        FileData::Dense(d) => &d.shape,
    };
    let prefix = shape[..shape.len().saturating_sub(1)]
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n));
    if prefix.is_none_or(|p| p > MAX_DENSE_PREFIX) {
        return;
    }
    if let Ok(t) = tensor_from_data(data, None, "fuzz")
        && let Err(e) = t.validate("t")
    {
        panic!("a tensor loaded from a file is invalid: {e}");
    }
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

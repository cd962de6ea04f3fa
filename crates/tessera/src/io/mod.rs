//! Tensor file formats: Matrix Market (`.mtx`), NumPy (`.npy`), FROSTT (`.tns`) and PNG images
//! (`.png`, read only, as 2-d `u8` gray); BED interval files (`.bed`, `.bed.gz`, [`bed`]), which
//! hold intervals rather than tensor entries and are read into records.
//!
//! Readers produce either coordinate data ([`CooData`]) or a dense array ([`DenseData`]); turning
//! those into a stored tensor of some format is `tensor::files`' job. Every reader reports a
//! malformed file as [`Error::File`] with a 1-based line number (0 for binary files or problems not
//! tied to a line) and never panics on bad input.

pub mod bed;
pub mod mtx;
pub mod npy;
pub mod nrrd;
pub mod png;
pub mod tns;

use crate::error::{Error, Result};
use crate::runtime::Buffer;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Coordinate data: entry `k` sits at `(coords[0][k], coords[1][k], ...)` (0-based) and holds
/// `values[k]`. Entries may repeat a position (the loader combines them).
#[derive(Clone, Debug, PartialEq)]
pub struct CooData {
    pub shape: Vec<usize>,
    /// One vector per dimension (`coords.len() == shape.len()`).
    pub coords: Vec<Vec<i64>>,
    pub values: Buffer,
}

/// A dense array in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseData {
    pub shape: Vec<usize>,
    pub values: Buffer,
}

/// What a tensor file holds.
#[derive(Clone, Debug, PartialEq)]
pub enum FileData {
    Coo(CooData),
    Dense(DenseData),
}

/// Read a tensor file, choosing the format by extension (`.mtx`, `.npy`, `.tns`, `.png`,
/// `.nrrd`/`.nhdr`: a NRRD's samples as a dense array, its orientation dropped; read it with
/// `nrrd::read_nrrd_file` to keep it).
pub fn read_file(path: &Path) -> Result<FileData> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    // Check the extension before opening, so a typo in the name reports the real problem.
    if !matches!(
        ext.as_str(),
        "mtx" | "npy" | "tns" | "png" | "nrrd" | "nhdr"
    ) {
        return Err(Error::Usage(format!(
            "{name}: unknown input file type `.{ext}` (use .mtx, .npy, .tns, .png or .nrrd)"
        )));
    }
    if matches!(ext.as_str(), "nrrd" | "nhdr") {
        // By path: a detached data file is found beside the header.
        return nrrd::read_nrrd_file(path).map(|n| FileData::Dense(n.data));
    }
    let file = File::open(path).map_err(|e| Error::io(&name, e))?;
    let r = BufReader::new(file);
    match ext.as_str() {
        "mtx" => mtx::read_mtx(r, &name),
        "npy" => npy::read_npy(r, &name).map(FileData::Dense),
        "png" => png::read_png(r, &name).map(FileData::Dense),
        _ => tns::read_tns(r, &name).map(FileData::Coo),
    }
}

/// Placeholder path for write errors raised by the writer functions, which do not know where
/// their output goes; [`write_atomic`] replaces it by the real path.
pub(crate) const OUTPUT: &str = "<output>";

/// Map an error of the output stream.
pub(crate) fn write_err(e: std::io::Error) -> Error {
    Error::io(OUTPUT, e)
}

/// Write `path` all-or-nothing: `f` writes into a temporary file in the same directory (so the
/// final rename stays on one file system and is atomic), which is flushed, synced and renamed
/// over `path`. On any error the temporary file is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let mut s = Staged::create(path)?;
    s.write(f)?;
    commit_all(vec![s])
}

/// Temporary files being written now, removed by [`remove_temp_files`] when the process is
/// interrupted (the `tessera` binary calls it from its Ctrl-C / SIGTERM handler).
static TEMP_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temp_files() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic elsewhere while holding the lock leaves the list itself intact.
    TEMP_FILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remove every temporary output file still being written, then run `then` with the list
/// still locked: an interrupt handler passes `|| std::process::exit(130)`, so no file can be
/// created or committed between the cleanup and the exit. The removed files are forgotten, so
/// a commit of one of them fails instead of publishing a file cut short.
pub fn remove_temp_files_then<T>(then: impl FnOnce() -> T) -> T {
    let mut list = temp_files();
    for p in list.drain(..) {
        let _ = std::fs::remove_file(p);
    }
    let out = then();
    drop(list);
    out
}

/// An output file being written: a temporary file beside `path`, created at once (so a path
/// that cannot be written fails before any work is done), renamed over `path` by
/// [`commit_all`], and removed if dropped uncommitted.
pub struct Staged {
    path: PathBuf,
    tmp: PathBuf,
    name: String,
    written: bool,
}

impl Staged {
    pub fn create(path: &Path) -> Result<Staged> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let name = path.display().to_string();
        let file_name = path
            .file_name()
            .ok_or_else(|| Error::Usage(format!("{name}: not a file name")))?;
        if path.is_dir() {
            return Err(Error::Usage(format!("{name}: is a directory, not a file")));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // The pid and a counter keep concurrent writers (other processes, other threads) apart.
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{}",
            file_name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut list = temp_files();
        File::create(&tmp).map_err(|e| Error::io(&name, e))?;
        list.push(tmp.clone());
        Ok(Staged {
            path: path.to_path_buf(),
            tmp,
            name,
            written: false,
        })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write the whole content (flushed and synced); errors name the final path.
    pub fn write(&mut self, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
        write_tmp(&self.tmp, &self.name, f)?;
        self.written = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let mut list = temp_files();
        if let Some(k) = list.iter().position(|p| *p == self.tmp) {
            list.swap_remove(k);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Rename every written file over its path, or none: nothing is renamed unless all were
/// written and are still there (an interrupted process removes them), and the renames run
/// with the temporary-file list locked, so an interrupt does not land between them.
pub fn commit_all(files: Vec<Staged>) -> Result<()> {
    let mut list = temp_files();
    for s in &files {
        if !s.written || !list.contains(&s.tmp) {
            return Err(Error::Io {
                path: s.name.clone(),
                msg: "the output was not written completely".into(),
            });
        }
    }
    for s in &files {
        std::fs::rename(&s.tmp, &s.path).map_err(|e| Error::io(&s.name, e))?;
        list.retain(|p| *p != s.tmp);
    }
    Ok(())
}

fn write_tmp(tmp: &Path, name: &str, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let file = File::create(tmp).map_err(|e| Error::io(name, e))?;
    let mut w = Recording {
        inner: BufWriter::new(file),
        error: None,
    };
    let written = f(&mut w).and_then(|()| w.flush().map_err(write_err));
    let real_path = |e: Error, recorded: Option<std::io::Error>| match (e, recorded) {
        // The stream failed (disk full, ...): report the OS error against the real path.
        (_, Some(io)) => Error::io(name, io),
        (Error::Io { path, msg }, None) if path == OUTPUT => Error::Io {
            path: name.to_string(),
            msg,
        },
        (e, None) => e,
    };
    if let Err(e) = written {
        return Err(real_path(e, w.error.take()));
    }
    let file = w
        .inner
        .into_inner()
        .map_err(|e| Error::io(name, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(name, e))
}

/// A writer that remembers the first OS error, so it can be reported with the right path
/// whatever the writer function made of it.
struct Recording<W: Write> {
    inner: W,
    error: Option<std::io::Error>,
}

impl<W: Write> Recording<W> {
    fn record<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r
            && self.error.is_none()
        {
            self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
}

impl<W: Write> Write for Recording<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.record(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.record(r)
    }
}

/// Lines of a text file with their 1-based numbers, without the line terminator.
pub(crate) struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    line: usize,
    path: String,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(r: R, path: &str) -> Lines<R> {
        Lines {
            r,
            buf: Vec::new(),
            line: 0,
            path: path.to_string(),
        }
    }

    /// Number of the last line returned (0 before the first).
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>> {
        self.buf.clear();
        let n = self
            .r
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut text: &[u8] = &self.buf;
        while let [rest @ .., b'\n' | b'\r'] = text {
            text = rest;
        }
        match std::str::from_utf8(text) {
            Ok(s) => Ok(Some((self.line, s))),
            Err(_) => Err(Error::file(&self.path, self.line, "not valid UTF-8 text")),
        }
    }
}

/// The first `N` whitespace-separated fields of a line and the total number of fields, without
/// allocating: coordinate files have millions of lines.
pub(crate) fn fields<const N: usize>(line: &str) -> ([&str; N], usize) {
    let mut out = [""; N];
    let mut count = 0;
    for (k, tok) in line.split_whitespace().enumerate() {
        if let Some(slot) = out.get_mut(k) {
            *slot = tok;
        }
        count += 1;
    }
    (out, count)
}

/// Parse a float as written by C, Fortran or Python (`1.5`, `-2e-3`, `1.0D+02`, `inf`, `nan`).
pub(crate) fn parse_f64(tok: &str) -> Option<f64> {
    tok.parse::<f64>().ok().or_else(|| {
        // Fortran writes the exponent with `D`; old Matrix Market files still contain it.
        if tok.contains(['d', 'D']) {
            tok.replace(['d', 'D'], "e").parse::<f64>().ok()
        } else {
            None
        }
    })
}

/// Parse a 1-based index bounded by `extent` and return it 0-based; `what` names the dimension
/// for the message ("row", "column", "index 2").
pub(crate) fn parse_index(
    tok: &str,
    extent: Option<usize>,
    what: &str,
    path: &str,
    line: usize,
) -> Result<i64> {
    let i: i64 = tok
        .parse()
        .map_err(|_| Error::file(path, line, format!("{what} `{tok}` is not an integer")))?;
    if i < 1 {
        return Err(Error::file(
            path,
            line,
            format!("{what} {i} out of range: indices start at 1"),
        ));
    }
    if let Some(n) = extent
        && i as u64 > n as u64
    {
        return Err(Error::file(
            path,
            line,
            format!("{what} {i} out of range: the extent is {n}"),
        ));
    }
    Ok(i - 1)
}

/// Number of elements of a shape, or an error if it does not fit in memory addressing.
pub(crate) fn element_count(shape: &[usize], path: &str, line: usize) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .ok_or_else(|| Error::file(path, line, format!("shape {shape:?} is too large")))
}

/// How many elements to reserve for a count read from a file header: the header may lie, so
/// memory grows with the data actually read beyond a modest start.
pub(crate) fn reserve_hint(n: usize) -> usize {
    n.min(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-io-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn write_atomic_writes_the_whole_file() {
        let d = temp_dir("atomic-ok");
        let p = d.join("out.txt");
        write_atomic(&p, |w| w.write_all(b"hello\n").map_err(write_err)).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "hello\n");
        assert_eq!(entries(&d), vec!["out.txt"]);
        // Overwriting replaces the content.
        write_atomic(&p, |w| w.write_all(b"bye\n").map_err(write_err)).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "bye\n");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn write_atomic_leaves_no_file_on_error() {
        let d = temp_dir("atomic-err");
        let p = d.join("out.npy");
        let err = write_atomic(&p, |w| {
            w.write_all(&[7; 100_000]).map_err(write_err)?;
            Err(Error::Usage("stop".into()))
        })
        .unwrap_err();
        assert_eq!(err, Error::Usage("stop".into()));
        assert!(entries(&d).is_empty(), "{:?}", entries(&d));
        // An existing file is left untouched.
        std::fs::write(&p, "old").unwrap();
        assert!(write_atomic(&p, |_| Err(Error::Usage("stop".into()))).is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(entries(&d), vec!["out.npy"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn staged_files_are_published_together_or_not_at_all() {
        let d = temp_dir("staged");
        let (a, b) = (d.join("a.txt"), d.join("b.txt"));
        // Both written: both published, no temporary file left.
        let mut sa = Staged::create(&a).unwrap();
        let mut sb = Staged::create(&b).unwrap();
        assert_eq!(
            entries(&d).len(),
            2,
            "the temporary files exist from the start"
        );
        sa.write(|w| w.write_all(b"a").map_err(write_err)).unwrap();
        sb.write(|w| w.write_all(b"b").map_err(write_err)).unwrap();
        commit_all(vec![sa, sb]).unwrap();
        assert_eq!(entries(&d), vec!["a.txt", "b.txt"]);
        // One not written: neither is published, both old files stay.
        let mut sa = Staged::create(&a).unwrap();
        let sb = Staged::create(&b).unwrap();
        sa.write(|w| w.write_all(b"new").map_err(write_err))
            .unwrap();
        assert!(commit_all(vec![sa, sb]).is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a");
        assert_eq!(entries(&d), vec!["a.txt", "b.txt"]);
        // Dropped without a commit: removed.
        drop(Staged::create(&d.join("c.txt")).unwrap());
        assert_eq!(entries(&d), vec!["a.txt", "b.txt"]);
        // A directory is not an output file, and a missing directory fails at once.
        assert!(Staged::create(&d).is_err());
        assert!(Staged::create(&d.join("no/such/dir.txt")).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn write_atomic_names_the_path_on_os_errors() {
        let p = Path::new("/nonexistent-dir-tessera/x.npy");
        match write_atomic(p, |_| Ok(())) {
            Err(Error::Io { path, .. }) => assert_eq!(path, "/nonexistent-dir-tessera/x.npy"),
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    #[test]
    fn read_file_dispatches_on_extension() {
        let d = temp_dir("read");
        let m = d.join("a.MTX");
        std::fs::write(
            &m,
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n2 1 3.5\n",
        )
        .unwrap();
        match read_file(&m).unwrap() {
            FileData::Coo(c) => {
                assert_eq!(c.shape, vec![2, 2]);
                assert_eq!(c.coords, vec![vec![1], vec![0]]);
                assert_eq!(c.values, Buffer::F64(vec![3.5].into()));
            }
            other => panic!("{other:?}"),
        }
        let t = d.join("v.tns");
        std::fs::write(&t, "1 5\n3 7\n").unwrap();
        assert!(matches!(read_file(&t).unwrap(), FileData::Coo(c) if c.shape == vec![3]));
        let n = d.join("x.npy");
        let data = DenseData {
            shape: vec![2],
            values: Buffer::I32(vec![4, 5].into()),
        };
        write_atomic(&n, |w| npy::write_npy(w, &data)).unwrap();
        assert_eq!(read_file(&n).unwrap(), FileData::Dense(data));
        match read_file(&d.join("x.csv")) {
            Err(Error::Usage(msg)) => assert!(msg.contains("x.csv") && msg.contains(".csv")),
            other => panic!("{other:?}"),
        }
        match read_file(Path::new("/nonexistent/z.mtx")) {
            Err(Error::Io { path, .. }) => assert_eq!(path, "/nonexistent/z.mtx"),
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn lines_strip_terminators_and_count() {
        let mut l = Lines::new(&b"a\r\nb\n\nc"[..], "f");
        let mut got = vec![];
        while let Some((n, s)) = l.next_line().unwrap() {
            got.push((n, s.to_string()));
        }
        let want = [(1, "a"), (2, "b"), (3, ""), (4, "c")];
        assert_eq!(got, want.map(|(n, s)| (n, s.to_string())));
        let mut bad = Lines::new(&b"ok\n\xff\n"[..], "f");
        assert!(bad.next_line().is_ok());
        assert_eq!(
            bad.next_line().unwrap_err(),
            Error::file("f", 2, "not valid UTF-8 text")
        );
    }

    #[test]
    fn fortran_exponents_parse() {
        assert_eq!(parse_f64("1.5D+02"), Some(150.0));
        assert_eq!(parse_f64("-2e-3"), Some(-0.002));
        assert_eq!(parse_f64("Inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64("x"), None);
    }
}

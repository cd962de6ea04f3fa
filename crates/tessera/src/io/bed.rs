//! BED interval files (`.bed`, and gzip-compressed `.bed.gz`): tab-separated
//! `chrom start end [more fields]`, 0-based and half-open (`[start, end)`).
//!
//! Header lines (`#...`, `track ...`, `browser ...`) and blank lines are skipped. Every other
//! line is a record; a record whose first three fields are missing or malformed is an
//! [`Error::File`] naming the file and its 1-based line. Chromosome names are numbered by a
//! [`ChromNames`] table in first-appearance order; passing the same table to the reads of two
//! files gives both the same numbering (what a pairwise operation needs).
//!
//! Zero-length records (`start == end`) are kept as read; [`BedRecord::span`] gives the span
//! bedtools compares them with (`[start - 1, end + 1)`, bedtools' `Record::adjustZeroLength`),
//! so that an insertion point overlaps the features around it as in `bedtools intersect`.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Chromosome names numbered 0, 1, ... in the order they were first seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChromNames {
    names: Vec<String>,
    index: HashMap<String, usize>,
}

impl ChromNames {
    pub fn new() -> ChromNames {
        ChromNames::default()
    }

    /// The number of `name`, numbering it if it is new.
    pub fn id(&mut self, name: &str) -> usize {
        if let Some(&k) = self.index.get(name) {
            return k;
        }
        let k = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), k);
        k
    }

    /// The name numbered `k`.
    pub fn name(&self, k: usize) -> &str {
        &self.names[k]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// One data line of a BED file.
#[derive(Clone, Debug, PartialEq)]
pub struct BedRecord {
    /// The chromosome's number in the [`ChromNames`] table the file was read with.
    pub chrom: usize,
    pub start: i64,
    pub end: i64,
    /// The line as read, without its line terminator (what the interval commands print).
    pub text: String,
    /// 1-based line number in the file.
    pub line: usize,
}

impl BedRecord {
    /// The half-open span `[lo, hi)` this record covers when compared with others: the record
    /// itself, or `[start - 1, end + 1)` for a zero-length one (as bedtools does, so a
    /// zero-length record is never empty).
    pub fn span(&self) -> (i64, i64) {
        if self.start == self.end {
            (self.start - 1, self.end + 1)
        } else {
            (self.start, self.end)
        }
    }
}

/// Whether a line holds no record: blank, a comment, or a `track` / `browser` header.
fn is_header(line: &str) -> bool {
    let t = line.trim_start();
    if t.is_empty() || t.starts_with('#') {
        return true;
    }
    let word = t.split([' ', '\t']).next().unwrap_or("");
    word == "track" || word == "browser"
}

/// Parse BED text from `r`; `path` names the source in errors.
pub fn read_bed_from(
    r: impl BufRead,
    path: &str,
    names: &mut ChromNames,
) -> Result<Vec<BedRecord>> {
    let mut out = vec![];
    for (k, line) in r.lines().enumerate() {
        let lineno = k + 1;
        let line = line.map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => Error::file(
                path,
                lineno,
                "not text (invalid UTF-8 or corrupt compression)",
            ),
            _ => Error::io(path, e),
        })?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if is_header(line) {
            continue;
        }
        let bad = |msg: String| Error::file(path, lineno, msg);
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < 3 {
            return Err(bad(format!(
                "a BED line needs at least 3 tab-separated fields (chrom, start, end), found {}",
                fields.len()
            )));
        }
        let chrom_name = fields[0];
        if chrom_name.is_empty() {
            return Err(bad("empty chromosome name".into()));
        }
        let coord = |what: &str, s: &str| -> Result<i64> {
            match s.trim().parse::<i64>() {
                Ok(v) if v >= 0 => Ok(v),
                Ok(v) => Err(bad(format!("{what} {v} is negative"))),
                Err(_) => Err(bad(format!("{what} `{s}` is not an integer"))),
            }
        };
        let start = coord("start", fields[1])?;
        let end = coord("end", fields[2])?;
        if end < start {
            return Err(bad(format!("end {end} is before start {start}")));
        }
        // Endpoints become f64 in the tensors: refuse any they would round.
        const EXACT: i64 = 1 << 53;
        if end >= EXACT {
            return Err(bad(format!("end {end} is too large (at most 2^53 - 1)")));
        }
        out.push(BedRecord {
            chrom: names.id(chrom_name),
            start,
            end,
            text: line.to_string(),
            line: lineno,
        });
    }
    Ok(out)
}

/// Read a `.bed` or `.bed.gz` file (gzip is recognised by its magic bytes, whatever the name).
pub fn read_bed(path: &Path, names: &mut ChromNames) -> Result<Vec<BedRecord>> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| Error::io(&name, e))?;
    let mut r = BufReader::new(file);
    let gz = r
        .fill_buf()
        .map_err(|e| Error::io(&name, e))?
        .starts_with(&[0x1f, 0x8b]);
    if gz {
        let dec: Box<dyn Read> = Box::new(flate2::bufread::MultiGzDecoder::new(r));
        read_bed_from(BufReader::new(dec), &name, names)
    } else {
        read_bed_from(r, &name, names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<BedRecord>> {
        read_bed_from(text.as_bytes(), "t.bed", &mut ChromNames::new())
    }

    #[test]
    fn records_headers_and_names() {
        let text = "track name=x\nbrowser position chr1:1-10\n# c\n\nchr2\t5\t9\tname\t0\t+\r\nchr1\t0\t3\nchr2\t7\t7\n";
        let mut names = ChromNames::new();
        let r = read_bed_from(text.as_bytes(), "t.bed", &mut names).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].chrom, r[0].start, r[0].end, r[0].line), (0, 5, 9, 5));
        assert_eq!(r[0].text, "chr2\t5\t9\tname\t0\t+");
        assert_eq!((r[1].chrom, r[2].chrom), (1, 0));
        assert_eq!(names.name(1), "chr1");
        assert_eq!(r[1].span(), (0, 3));
        assert_eq!(r[2].span(), (6, 8));
        // A second file numbers the names it shares the same way.
        let s = read_bed_from("chr3\t1\t2\nchr1\t1\t2\n".as_bytes(), "u.bed", &mut names).unwrap();
        assert_eq!((s[0].chrom, s[1].chrom), (2, 1));
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let e = |t: &str| parse(t).unwrap_err().to_string();
        assert_eq!(
            e("chr1\t1\t2\nchr1\tx\t3\n"),
            "t.bed:2: start `x` is not an integer"
        );
        assert!(e("chr1\t5\t3\n").contains("t.bed:1: end 3 is before start 5"));
        assert!(e("\nchr1 1 2\n").contains("t.bed:2: a BED line needs at least 3"));
        assert!(e("chr1\t-1\t2\n").contains("start -1 is negative"));
        assert!(e("chr1\t1\t99999999999999999999\n").contains("is not an integer"));
        assert!(e("chr1\t1\t9007199254740992\n").contains("too large"));
        assert!(e("\t1\t2\n").contains("empty chromosome name"));
    }

    #[test]
    fn gzip_files_are_read_and_corrupt_ones_refused() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("tessera-bed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.bed.gz");
        let mut enc = flate2::write::GzEncoder::new(vec![], flate2::Compression::default());
        enc.write_all(b"chr1\t1\t4\nchrX\t2\t3\n").unwrap();
        let bytes = enc.finish().unwrap();
        std::fs::write(&p, &bytes).unwrap();
        let r = read_bed(&p, &mut ChromNames::new()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[1].start, r[1].end), (2, 3));
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_bed(&p, &mut ChromNames::new()).is_err());
        let e = read_bed(&dir.join("missing.bed"), &mut ChromNames::new()).unwrap_err();
        assert!(e.to_string().contains("missing.bed"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

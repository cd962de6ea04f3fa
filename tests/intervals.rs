//! BED interval operations (issue 14): the Tessera programs of `algorithms::intervals` against
//! a brute force over the records, the continuous reference evaluator, `bedtools intersect`
//! when it is installed, and the `tessera intervals` command on the shared real data.

mod common;
// The benchmark's Tessera side (its file mode is tested against bedtools below).
#[path = "../examples/interval_overlap.rs"]
#[allow(dead_code)]
mod interval_overlap;

use common::cli::{Dir, tessera};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::algorithms::intervals::{
    IntervalOp, IntervalResult, interval_tensor, program_text, run, run_grid,
};
use tessera::io::bed::{BedRecord, ChromNames, read_bed, read_bed_from};
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::tensor::Tensor;

const OPS: [IntervalOp; 3] = [IntervalOp::Overlap, IntervalOp::Count, IntervalOp::Join];

fn overlaps(a: &BedRecord, b: &BedRecord) -> bool {
    let ((a0, a1), (b0, b1)) = (a.span(), b.span());
    a.chrom == b.chrom && a0.max(b0) < a1.min(b1)
}

/// The definitions of `bedtools intersect -u / -c / -wa -wb`, pair by pair.
fn brute(op: IntervalOp, a: &[BedRecord], b: &[BedRecord]) -> IntervalResult {
    let hits = |x: &BedRecord| b.iter().filter(|y| overlaps(x, y)).count();
    match op {
        IntervalOp::Overlap => IntervalResult::Overlap(a.iter().map(|x| hits(x) > 0).collect()),
        IntervalOp::Count => IntervalResult::Count(a.iter().map(|x| hits(x) as i64).collect()),
        IntervalOp::Join => {
            let mut p = vec![];
            for (i, x) in a.iter().enumerate() {
                for (j, y) in b.iter().enumerate() {
                    if overlaps(x, y) {
                        p.push((i, j));
                    }
                }
            }
            IntervalResult::Join(p)
        }
    }
}

/// Random BED text: a few chromosomes, short coordinates so that touching, nested, duplicate
/// and zero-length intervals (including at 0) all occur.
fn random_bed(rng: &mut StdRng, n: usize, chroms: &[&str]) -> String {
    let mut s = String::from("# random\n");
    let mut prev: Option<String> = None;
    for k in 0..n {
        let c = chroms[rng.random_range(0..chroms.len())];
        let line = match (rng.random_range(0..10), &prev) {
            // A duplicate of the previous line.
            (0, Some(p)) => p.clone(),
            // Zero-length (not at 0: bedtools widens it to [-1, 1) and then fails on the
            // negative start; `touching_nested_and_zero_length_intervals` has one at 0).
            (1, _) => {
                let a = rng.random_range(1..30);
                format!("{c}\t{a}\t{a}\tz{k}")
            }
            _ => {
                let a = rng.random_range(0..30);
                let len = rng.random_range(1..12);
                format!("{c}\t{a}\t{}\tr{k}", a + len)
            }
        };
        s.push_str(&line);
        s.push('\n');
        prev = Some(line);
    }
    s
}

fn read_pair(a: &str, b: &str) -> (Vec<BedRecord>, Vec<BedRecord>, ChromNames) {
    let mut names = ChromNames::new();
    let ra = read_bed_from(a.as_bytes(), "A.bed", &mut names).unwrap();
    let rb = read_bed_from(b.as_bytes(), "B.bed", &mut names).unwrap();
    (ra, rb, names)
}

#[test]
fn random_files_agree_with_brute_force() {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(14);
    for case in 0..40 {
        let (n, m) = (rng.random_range(0..25), rng.random_range(0..25));
        let a = random_bed(&mut rng, n, &["chr1", "chr2", "chrX"]);
        // B may hold chromosomes A has not and lack some A has.
        let b = random_bed(&mut rng, m, &["chr2", "chr1", "chrY"]);
        let (ra, rb, names) = read_pair(&a, &b);
        for op in OPS {
            let got = run(&runner, op, &ra, &rb, names.len())
                .unwrap_or_else(|e| panic!("case {case} {op:?}: {e}"));
            let grid = run_grid(&runner, op, &ra, &rb, names.len())
                .unwrap_or_else(|e| panic!("case {case} {op:?}, grid: {e}"));
            assert_eq!(got, grid, "case {case} {op:?}: naive and grid");
            assert_eq!(
                got,
                brute(op, &ra, &rb),
                "case {case} {op:?}\nA:\n{a}\nB:\n{b}"
            );
        }
    }
}

#[test]
fn touching_nested_and_zero_length_intervals() {
    let a = "c\t0\t5\nc\t5\t10\nc\t2\t3\nc\t4\t4\nc\t0\t0\nd\t1\t2\n";
    let b = "c\t5\t6\nc\t0\t10\nc\t3\t3\nc\t10\t10\n";
    let (ra, rb, names) = read_pair(a, b);
    let runner = Runner::jit();
    // [0,5) touches [5,6) (no overlap), lies in [0,10), meets the zero-length 3 (as [2,4))
    // and not the zero-length 10 (as [9,11)); [5,10) overlaps [5,6), [0,10), and the zero-length 10 (as [9,11)); [2,3) meets
    // [0,10) and [2,4); the zero-length 4 ([3,5)) meets [0,10) and [2,4); the zero-length 0
    // ([-1,1)) meets [0,10); chromosome d has no B records.
    let want = vec![2, 3, 2, 2, 1, 0];
    assert_eq!(
        run(&runner, IntervalOp::Count, &ra, &rb, names.len()).unwrap(),
        IntervalResult::Count(want)
    );
    assert_eq!(
        run(&runner, IntervalOp::Count, &ra, &rb, names.len()).unwrap(),
        brute(IntervalOp::Count, &ra, &rb)
    );
    assert_eq!(
        run_grid(&runner, IntervalOp::Count, &ra, &rb, names.len()).unwrap(),
        brute(IntervalOp::Count, &ra, &rb)
    );
}

#[test]
fn empty_files() {
    let (ra, rb, names) = read_pair("", "c\t1\t2\n");
    let runner = Runner::jit();
    for op in OPS {
        assert_eq!(
            run(&runner, op, &ra, &rb, names.len()).unwrap(),
            brute(op, &ra, &rb)
        );
        assert_eq!(
            run(&runner, op, &rb, &ra, names.len()).unwrap(),
            brute(op, &rb, &ra)
        );
        assert_eq!(
            run_grid(&runner, op, &ra, &rb, names.len()).unwrap(),
            brute(op, &ra, &rb)
        );
        assert_eq!(
            run_grid(&runner, op, &rb, &ra, names.len()).unwrap(),
            brute(op, &rb, &ra)
        );
    }
}

/// The continuous reference evaluator runs the same programs on the same tensors.
#[test]
fn the_reference_evaluator_agrees() {
    let mut rng = StdRng::seed_from_u64(41);
    let runner = Runner::jit();
    for _ in 0..6 {
        let a = random_bed(&mut rng, 8, &["chr1", "chr2"]);
        let b = random_bed(&mut rng, 8, &["chr1", "chr2"]);
        let (ra, rb, names) = read_pair(&a, &b);
        let nc = names.len();
        for (op, out, fmt, shape) in [
            (
                IntervalOp::Overlap,
                "O",
                "Dense(Element(false))",
                vec![ra.len()],
            ),
            (IntervalOp::Count, "K", "Dense(Element(0))", vec![ra.len()]),
        ] {
            let mut env = BTreeMap::new();
            env.insert(
                "A".to_string(),
                interval_tensor(&ra, nc).unwrap().to_piece_tensor(),
            );
            env.insert(
                "B".to_string(),
                interval_tensor(&rb, nc).unwrap().to_piece_tensor(),
            );
            let f = Format::parse(fmt, None).unwrap();
            env.insert(
                out.to_string(),
                Tensor::empty(&f, &shape).unwrap().to_piece_tensor(),
            );
            // The pair flags of the count program.
            let j = Format::parse("Dense(SparseList(SparseList(Element(false))))", None).unwrap();
            let pairs = Tensor::empty(&j, &[nc, ra.len(), rb.len()]).unwrap();
            env.insert("J".to_string(), pairs.to_piece_tensor());
            let p = parse_program(program_text(op)).unwrap();
            tessera::eval::continuous::run(&p, &mut env).unwrap();
            let mut per_a = vec![0i64; ra.len()];
            for (c, v) in &env[out].canonical().pieces {
                if let tessera::tensor::pieces::PieceCoord::Int(i) = c[0] {
                    per_a[i as usize] = v.as_i64();
                }
            }
            let want = match run(&runner, op, &ra, &rb, nc).unwrap() {
                IntervalResult::Overlap(o) => o.iter().map(|&b| b as i64).collect(),
                IntervalResult::Count(k) => k,
                IntervalResult::Join(_) => unreachable!(),
            };
            assert_eq!(per_a, want, "{op:?}\nA:\n{a}\nB:\n{b}");
        }
    }
}

fn bedtools() -> Option<PathBuf> {
    let out = Command::new("bedtools").arg("--version").output().ok()?;
    out.status.success().then(|| PathBuf::from("bedtools"))
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `tessera intervals OP` and `bedtools intersect` print the same lines (join pairs sorted
/// within each A record: bedtools reports the B records of one A record in its own order).
fn compare_with_bedtools(a: &str, b: &str, what: &str) {
    for (op, flags) in [
        ("overlap", &["-u"][..]),
        ("count", &["-c"]),
        ("join", &["-wa", "-wb"]),
    ] {
        let ours = tessera(&["intervals", op, a, b]);
        assert!(
            ours.status.success(),
            "{what} {op}: {}",
            String::from_utf8_lossy(&ours.stderr)
        );
        let theirs = Command::new("bedtools")
            .args(["intersect", "-a", a, "-b", b])
            .args(flags)
            .output()
            .unwrap();
        assert!(
            theirs.status.success(),
            "bedtools: {}",
            String::from_utf8_lossy(&theirs.stderr)
        );
        let (mut x, mut y) = (lines(&ours.stdout), lines(&theirs.stdout));
        if op == "join" {
            x.sort();
            y.sort();
        }
        assert_eq!(x, y, "{what} {op}");
    }
}

#[test]
fn bedtools_agrees_on_random_files() {
    if bedtools().is_none() {
        eprintln!("SKIPPED: bedtools is not installed (the comparison with it did not run)");
        return;
    }
    let dir = Dir::new("intervals-bedtools");
    let mut rng = StdRng::seed_from_u64(7);
    for case in 0..15 {
        let a = dir.file(
            "a.bed",
            &random_bed(&mut rng, 30, &["chr1", "chr2", "chr3"]),
        );
        let b = dir.file(
            "b.bed",
            &random_bed(&mut rng, 30, &["chr2", "chr1", "chr4"]),
        );
        compare_with_bedtools(&a, &b, &format!("case {case}"));
    }
}

fn shared_data() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/intervals");
    if d.join("cpg.bed").exists() {
        Some(d)
    } else {
        eprintln!(
            "SKIPPED: the shared interval data ({}) is absent",
            d.display()
        );
        None
    }
}

/// Real files: the library against brute force (small pairs), the command against bedtools.
#[test]
fn shared_real_data() {
    let Some(d) = shared_data() else { return };
    let runner = Runner::jit();
    for (a, b) in [
        ("exons.bed", "cpg.bed"),
        ("chipseq.bed", "chipseq_background.bed"),
        ("lamina.bed", "cpg.bed"),
        ("aorta.bed", "chromsizes.bed"),
    ] {
        let mut names = ChromNames::new();
        let ra = read_bed(&d.join(a), &mut names).unwrap();
        let rb = read_bed(&d.join(b), &mut names).unwrap();
        for op in OPS {
            let want = brute(op, &ra, &rb);
            let got = run(&runner, op, &ra, &rb, names.len()).unwrap();
            assert_eq!(got, want, "{a} {b} {op:?}");
            let grid = run_grid(&runner, op, &ra, &rb, names.len()).unwrap();
            assert_eq!(grid, want, "{a} {b} {op:?}, grid");
        }
        if bedtools().is_some() {
            let (pa, pb) = (d.join(a), d.join(b));
            compare_with_bedtools(pa.to_str().unwrap(), pb.to_str().unwrap(), a);
        } else {
            eprintln!(
                "SKIPPED: bedtools is not installed ({a} vs {b} checked by brute force only)"
            );
        }
    } // Larger pairs (88k x 73k, 12k x 43k records): the grid programs of the command against
    // bedtools only (a brute force over all pairs would take minutes).
    if bedtools().is_none() {
        eprintln!("SKIPPED: bedtools is not installed (the large real pairs did not run)");
        return;
    }
    for (a, b) in [
        ("gerp.chr1.bed", "simpleRepeats.chr1.bed"),
        ("aluY.chr1.bed", "refseq.chr1.exons.bed"),
        // (Not ucsc_human.bed: its lines vary in field count, which bedtools refuses.)
        ("exons.bed", "lamina.bed"),
    ] {
        let (pa, pb) = (d.join(a), d.join(b));
        compare_with_bedtools(pa.to_str().unwrap(), pb.to_str().unwrap(), a);
    }
}

#[test]
fn the_intervals_command() {
    let dir = Dir::new("intervals-cli");
    let a = dir.file(
        "a.bed",
        "track name=a\nchr1\t0\t5\tx\nchr1\t5\t10\ty\nchr2\t1\t2\tz\n",
    );
    // B gzip-compressed: read by its magic bytes.
    let b = dir.path("b.bed.gz");
    {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(vec![], flate2::Compression::default());
        enc.write_all(b"chr1\t4\t6\tp\nchr1\t9\t12\tq\n").unwrap();
        std::fs::write(&b, enc.finish().unwrap()).unwrap();
    }
    let ok = |args: &[&str]| {
        let o = tessera(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(
        ok(&["intervals", "overlap", &a, &b]),
        "chr1\t0\t5\tx\nchr1\t5\t10\ty\n"
    );
    assert_eq!(
        ok(&["intervals", "count", &a, &b]),
        "chr1\t0\t5\tx\t1\nchr1\t5\t10\ty\t2\nchr2\t1\t2\tz\t0\n"
    );
    assert_eq!(
        ok(&["intervals", "join", &a, &b]),
        "chr1\t0\t5\tx\tchr1\t4\t6\tp\nchr1\t5\t10\ty\tchr1\t4\t6\tp\nchr1\t5\t10\ty\tchr1\t9\t12\tq\n"
    );
    assert_eq!(
        ok(&["intervals", "count", &a, &b, "--naive"]),
        "chr1\t0\t5\tx\t1\nchr1\t5\t10\ty\t2\nchr2\t1\t2\tz\t0\n"
    );
    let out = dir.path("o.bed");
    let shown = ok(&[
        "intervals",
        "overlap",
        &a,
        &b,
        "--out",
        &out,
        "--show-program",
    ]);
    assert!(shown.starts_with("# O .= false\n"), "{shown}");
    assert!(!shown.contains("chr1"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "chr1\t0\t5\tx\nchr1\t5\t10\ty\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(ok(&["intervals", "count", &a, &b, "--json"]).trim()).unwrap();
    assert_eq!(json["a_records"], 3);
    assert_eq!(json["b_records"], 2);
    assert_eq!(json["overlapping_pairs"], 3);
    let err = |args: &[&str]| {
        let o = tessera(args);
        assert!(!o.status.success(), "{args:?} should fail");
        String::from_utf8(o.stderr).unwrap()
    };
    let bad = dir.file("bad.bed", "chr1\t1\t2\n# x\nchr1\t9\t3\n");
    let e = err(&["intervals", "overlap", &a, &bad]);
    assert!(e.contains("bad.bed:3: end 3 is before start 9"), "{e}");
    let e = err(&["intervals", "count", &dir.path("none.bed"), &a]);
    assert!(e.contains("none.bed"), "{e}");
    // A failed run leaves no output file behind.
    let e = err(&["intervals", "join", &bad, &a, "--out", &dir.path("p.bed")]);
    assert!(e.contains("bad.bed:3"), "{e}");
    assert!(!std::path::Path::new(&dir.path("p.bed")).exists());
}

/// `examples/interval_overlap.rs --a A.bed --b B.bed` (what `bench/interval_overlap.py` times)
/// gives bedtools' answer for every line of A: `intersect -c`'s count and `-u`'s membership.
#[test]
fn interval_overlap_example_reads_files_as_bedtools_does() {
    let Some(d) = shared_data() else { return };
    if bedtools().is_none() {
        eprintln!("SKIPPED: bedtools is not installed (the example's file mode was not checked)");
        return;
    }
    // Few and many chromosomes, a header line (lamina), several B lines per A line.
    for (a, b) in [
        ("exons.bed", "cpg.bed"),
        ("lamina.bed", "cpg.bed"),
        ("chipseq.bed", "chipseq_background.bed"),
    ] {
        let (pa, pb) = (d.join(a), d.join(b));
        let input = interval_overlap::read_files(&pa, &pb, 1).unwrap();
        let got = interval_overlap::operations(&input).unwrap();
        let out = Command::new("bedtools")
            .args(["intersect", "-c", "-a"])
            .arg(&pa)
            .arg("-b")
            .arg(&pb)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "bedtools: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let counts: Vec<i64> = lines(&out.stdout)
            .iter()
            .map(|l| l.rsplit('\t').next().unwrap().parse().unwrap())
            .collect();
        assert!(
            counts.iter().sum::<i64>() > 0,
            "{a} {b}: no overlaps to compare"
        );
        let hit: Vec<i64> = counts.iter().map(|&k| (k > 0) as i64).collect();
        assert_eq!(got[0].op, "overlap");
        assert_eq!(got[0].per_query, hit, "{a} {b} overlap");
        assert_eq!(got[1].op, "count");
        assert_eq!(got[1].per_query, counts, "{a} {b} count");
    }
}

//! The short fuzz run of the test suite: every target over its committed corpus
//! (`fuzz/corpus/TARGET/`) and a fixed number of deterministic mutations of it. A panic is a
//! finding; the message names the target and the input (saved under the temporary directory
//! so `cargo fuzz run TARGET FILE` replays it).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use tessera_fuzz::TARGETS;

/// Mutated inputs per target: the parsers and readers take microseconds, the differential
/// target compiles a kernel per case.
fn mutations(target: &str) -> usize {
    match target {
        "differential" | "grad" | "schedule" => 150,
        "einsum" => 1_000,
        _ => 3_000,
    }
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    assert!(!inputs.is_empty(), "{} holds no seeds", dir.display());
    inputs
}

/// One random edit of the kind libFuzzer makes: bit flips, byte changes, insertions,
/// deletions, copies within the input and splices with another seed.
fn mutate(rng: &mut StdRng, input: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = v.len();
        match rng.random_range(0..7) {
            0 if len > 0 => {
                let k = rng.random_range(0..len);
                v[k] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let k = rng.random_range(0..len);
                v[k] = *[0u8, 0xff, b'0', b'9', b'-', b'(', b')', b'[', b'\n']
                    .get(rng.random_range(0..9))
                    .expect("in range");
            }
            2 => {
                let k = rng.random_range(0..=len);
                v.insert(k, rng.random());
            }
            3 if len > 0 => {
                let k = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - k).min(8));
                v.drain(k..k + n);
            }
            4 if len > 0 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(a..=len.min(a + 16));
                let chunk = v[a..b].to_vec();
                let at = rng.random_range(0..=len);
                v.splice(at..at, chunk);
            }
            5 => {
                let other = &seeds[rng.random_range(0..seeds.len())];
                let cut = rng.random_range(0..=v.len());
                let from = rng.random_range(0..=other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let k = rng.random_range(0..=len);
                v.truncate(k);
            }
        }
    }
    v
}

/// Run `f` on `input`; on a panic, save the input and fail naming it.
fn run_one(target: &str, f: fn(&[u8]), input: &[u8], what: &str) {
    if std::panic::catch_unwind(|| f(input)).is_err() {
        let path = std::env::temp_dir().join(format!("tessera-fuzz-{target}-finding"));
        let saved = std::fs::write(&path, input).map_or_else(
            |e| format!("could not save it: {e}"),
            |()| format!("saved as {}", path.display()),
        );
        panic!("target `{target}` panicked on {what} ({saved}); input bytes: {input:?}");
    }
}

fn short_run(target: &str) {
    let f = TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .map(|(_, f)| *f)
        .expect("a known target");
    let seeds = corpus(target);
    for (k, s) in seeds.iter().enumerate() {
        run_one(target, f, s, &format!("seed {k}"));
    }
    let seed = target
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    let mut rng = StdRng::seed_from_u64(seed);
    for k in 0..mutations(target) {
        let base = &seeds[rng.random_range(0..seeds.len())];
        let input = mutate(&mut rng, base, &seeds);
        run_one(target, f, &input, &format!("mutation {k}"));
    }
}

#[test]
fn every_target_has_a_short_run() {
    let mut names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "differential",
            "einsum",
            "format",
            "grad",
            "mtx",
            "npy",
            "nrrd",
            "png",
            "program",
            "schedule",
            "tns"
        ]
    );
}

#[test]
fn program() {
    short_run("program");
}

#[test]
fn schedule() {
    short_run("schedule");
}

#[test]
fn format() {
    short_run("format");
}

#[test]
fn mtx() {
    short_run("mtx");
}

#[test]
fn npy() {
    short_run("npy");
}

#[test]
fn tns() {
    short_run("tns");
}

#[test]
fn nrrd() {
    short_run("nrrd");
}

#[test]
fn png() {
    short_run("png");
}

#[test]
fn einsum() {
    short_run("einsum");
}

#[test]
fn differential() {
    short_run("differential");
    eprintln!("{}", tessera_fuzz::differential::COUNTS.summary());
}

#[test]
fn grad() {
    short_run("grad");
    eprintln!("{}", tessera_fuzz::grad::COUNTS.summary());
}

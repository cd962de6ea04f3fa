//! A stable-Rust driver for the fuzz targets, for machines without cargo-fuzz or nightly and
//! for counting differential cases: random inputs (uniform bytes of random length, from a
//! seed) through one target until a count or a time limit, in this process. No coverage
//! guidance, so it explores less than libFuzzer; a panic is a finding and its input is saved.
//!
//! `cargo run --release -p tessera-fuzz --example stable_run -- TARGET CASES [SECONDS] [SEED]`

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use tessera_fuzz::TARGETS;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: stable_run TARGET CASES [SECONDS] [SEED]";
    let name = args.first().expect(usage);
    let cases: u64 = args.get(1).and_then(|a| a.parse().ok()).expect(usage);
    let limit = Duration::from_secs(
        args.get(2)
            .map_or(u64::MAX / 4, |a| a.parse().expect(usage)),
    );
    let seed: u64 = args.get(3).map_or(1, |a| a.parse().expect(usage));
    let &(_, target) = TARGETS
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no target `{name}`"));
    let mut rng = StdRng::seed_from_u64(seed);
    let start = Instant::now();
    let mut done = 0u64;
    while done < cases && start.elapsed() < limit {
        let len = rng.random_range(0..600);
        let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        // Saved before the run, so a hang or an abort leaves its input behind too.
        let file = std::env::temp_dir().join(format!("tessera-stable-run-{name}-{seed}"));
        std::fs::write(&file, &data).expect("the temporary directory is writable");
        target(&data);
        done += 1;
    }
    println!(
        "{name}: {done} inputs in {:.0} s, no finding",
        start.elapsed().as_secs_f64()
    );
    if *name == "differential" {
        println!("{}", tessera_fuzz::differential::COUNTS.summary());
    }
    if *name == "grad" {
        println!("{}", tessera_fuzz::grad::COUNTS.summary());
    }
}

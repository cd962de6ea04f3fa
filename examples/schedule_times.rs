//! How long each schedule command takes on the case-study programs of `examples/*.tess`
//! (issue 17 asks for at most a millisecond each; dependence analysis is FreeTensor's
//! compile-time hot spot). Each command is applied to its program many times and the median
//! is printed; a command a program refuses is timed too (the refusal is the analysis).
//!
//! `cargo run --release --example schedule_times`

use std::time::Instant;
use tessera::notation::parse::parse_program;
use tessera::transforms::schedule::schedule;

const CASES: &[(&str, &[&str])] = &[
    (
        "spmv_row",
        &[
            "split(i, 64)",
            "split(i, 64); reorder(j, i.1)",
            "reorder(j, i)",
            "merge(i, j)",
            "cache_reduce(i, y)",
        ],
    ),
    ("spmv_col", &["reorder(i, j)", "split(j, 16)"]),
    ("spgemm_gustavson", &["reorder(k, i)", "split(i, 8)"]),
    ("spgemm_inner", &["reorder(j, i)", "split(k, 4)"]),
    ("bellman_ford", &["split(j, 32)"]),
    ("bfs_push", &["split(j, 32)"]),
    ("convolve2d", &["split(i, 8)"]),
    ("triu_sum", &["split(i, 8)"]),
];

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    println!(
        "{:<20} {:<34} {:>10}  result",
        "program", "schedule", "median µs"
    );
    for (name, schedules) in CASES {
        let text = std::fs::read_to_string(dir.join(format!("{name}.tess"))).expect("example");
        let p = parse_program(&text).expect("example parses");
        for s in *schedules {
            let outcome = match schedule(&p, s) {
                Ok(_) => "applied".to_string(),
                Err(e) => format!(
                    "refused: {}",
                    e.to_string().chars().take(70).collect::<String>()
                ),
            };
            let mut times = vec![];
            for _ in 0..200 {
                let t0 = Instant::now();
                let _ = std::hint::black_box(schedule(&p, s));
                times.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "{name:<20} {s:<34} {:>10.1}  {outcome}",
                times[times.len() / 2]
            );
        }
    }
}

//! How long each schedule command takes, dependence analysis included (issue 17: "schedule
//! commands each take <= 1 ms on the case-study programs"). Every case-study program of
//! `examples/` (and SubdivNet's gradient program) gets a sequence of commands, legal ones and
//! ones the analysis refuses; each command is applied to the program the previous ones left
//! (a refused command leaves it unchanged) and timed alone, the median of `REPEATS` runs.
//!
//! `cargo run --release --example schedule_latency -- [REPEATS]`
//!
//! Prints one JSON line per command (program, command, outcome, median microseconds), then a
//! summary line with the slowest command and the median over all.

use std::time::Instant;
use tessera::Result;
use tessera::notation::parse::parse_program;
use tessera::transforms::grad::grad;
use tessera::transforms::schedule::{apply_one, parse_schedule};

/// The case studies and the commands tried on each, in order.
const CASES: &[(&str, &str, &str)] = &[
    (
        "spmv_row",
        include_str!("spmv_row.tess"),
        "split(i, 64); reorder(i.1, j); parallelize(i.0); vectorize(j); parallelize(j)",
    ),
    (
        "spgemm_gustavson",
        include_str!("spgemm_gustavson.tess"),
        "parallelize(i); reorder(k, j#1); fission(i, after for j#2); split(j#2, 8)",
    ),
    (
        "subdivnet",
        include_str!("subdivnet.tess"),
        "split(i, 8); reorder(f, i.1); vectorize(o); parallelize(i.0); unroll(j); merge(f, i.1)",
    ),
    (
        "gat",
        include_str!("gat.tess"),
        "fission(f#2, after @13); parallelize(i#1); vectorize(f#1); reorder(f#4, j#2); cache_reduce(i#3, z); split(j#1, 4)",
    ),
    (
        "longformer",
        include_str!("longformer.tess"),
        "parallelize(i#1); cache_reduce(i#2, z); vectorize(f#1); reorder(i#1, j#1); cache(i#3, O)",
    ),
    (
        "softras",
        include_str!("softras.tess"),
        "split(w, 8); vectorize(w.1); parallelize(f); reorder(h, f)",
    ),
    (
        "bellman_ford",
        include_str!("bellman_ford.tess"),
        "parallelize(j#2); fuse(j#1, j#2); parallelize(j)",
    ),
    (
        "erosion",
        include_str!("erosion.tess"),
        "parallelize(y); fuse(x#1, x#2); split(x#2, 16); vectorize(x#1)",
    ),
    (
        "masked_histogram",
        include_str!("masked_histogram.tess"),
        "parallelize(y); split(x, 16); reorder(x.0, y)",
    ),
];

fn main() -> Result<()> {
    let repeats: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(101)
        .max(1);
    let mut cases: Vec<(String, tessera::notation::ast::Program, String)> = vec![];
    for (name, text, commands) in CASES {
        cases.push((name.to_string(), parse_program(text)?, commands.to_string()));
    }
    // SubdivNet's gradient program (about 70 statements): the cut of its backward loop
    // between the row updates and the scatter, FreeTensor's scalar expansion included.
    let sd = parse_program(include_str!("subdivnet.tess"))?;
    let g = grad(&sd, &["x", "w0", "w1", "w2", "w3"], &["y"])?.program;
    cases.push((
        "subdivnet gradient".into(),
        g,
        "fission(f#2, after for o#2); fission(i#2, after for f#2); vectorize(o#1); vectorize(o#2); reorder(j#2, f#3); parallelize(i#2)"
            .into(),
    ));
    let mut all = vec![];
    for (name, program, commands) in &cases {
        let mut p = program.clone();
        for c in parse_schedule(commands)? {
            let mut times = vec![];
            let mut outcome = apply_one(&p, &c);
            for _ in 0..repeats {
                let t = Instant::now();
                outcome = apply_one(&p, &c);
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(f64::total_cmp);
            let us = times[times.len() / 2];
            all.push((us, format!("{name}: {}", c.text)));
            let status = match outcome {
                Ok(next) => {
                    p = next;
                    "applied".to_string()
                }
                Err(e) => format!("refused: {}", e.to_string().replace('"', "'")),
            };
            let first_line = status.lines().next().unwrap_or("");
            println!(
                "{{\"program\": \"{name}\", \"command\": \"{}\", \"us\": {us:.1}, \"outcome\": \"{first_line}\"}}",
                c.text
            );
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (slowest_us, slowest) = all.last().expect("commands were timed");
    println!(
        "{{\"commands\": {}, \"median_us\": {:.1}, \"slowest_us\": {slowest_us:.1}, \"slowest\": \"{slowest}\"}}",
        all.len(),
        all[all.len() / 2].0
    );
    Ok(())
}

//! `tessera intervals overlap|count|join A.bed B.bed`: `bedtools intersect -u / -c / -wa -wb`
//! as Tessera programs over continuous tensors (`tessera::algorithms::intervals`).

use clap::{Args, ValueEnum};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;
use tessera::algorithms::intervals::{self, IntervalOp, IntervalResult};
use tessera::error::Result;
use tessera::io::bed::{ChromNames, read_bed};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// A's lines that overlap some line of B (`bedtools intersect -u`)
    Overlap,
    /// A's lines, each followed by the number of B lines it overlaps (`bedtools intersect -c`)
    Count,
    /// Every overlapping pair: A's line then B's line (`bedtools intersect -wa -wb`)
    Join,
}

#[derive(Args, Debug)]
pub struct IntervalsArgs {
    pub op: Op,
    /// BED file (.bed or .bed.gz) whose lines are reported, in their order
    pub a: String,
    /// BED file (.bed or .bed.gz) they are compared with
    pub b: String,
    /// Write the BED lines to this file (atomically) instead of standard output
    #[arg(long, value_name = "PATH")]
    pub out: Option<String>,
    /// Print a one-line JSON summary instead of the BED lines
    #[arg(long)]
    pub json: bool,
    /// Print the Tessera program first (as `#` comment lines)
    #[arg(long)]
    pub show_program: bool,
    /// Compare every pair of records on a chromosome (the paper's naive program) instead of
    /// only the pairs that share a bin of the grid index
    #[arg(long)]
    pub naive: bool,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift) or `c` (C via the system compiler, cached on disk)
    #[arg(long, default_value = "tiered")]
    pub backend: String,
    #[command(flatten)]
    pub memory: super::MemoryArgs,
    #[command(flatten)]
    pub kernel: super::KernelArgs,
}

pub fn intervals(a: &IntervalsArgs) -> Result<String> {
    let op = match a.op {
        Op::Overlap => IntervalOp::Overlap,
        Op::Count => IntervalOp::Count,
        Op::Join => IntervalOp::Join,
    };
    let runner = super::compiling_runner(&a.backend, &a.kernel)?;
    let mut names = ChromNames::new();
    let ra = read_bed(Path::new(&a.a), &mut names)?;
    let rb = read_bed(Path::new(&a.b), &mut names)?;
    let t0 = Instant::now();
    let result = if a.naive {
        intervals::run(&runner, op, &ra, &rb, names.len())?
    } else {
        intervals::run_grid(&runner, op, &ra, &rb, names.len())?
    };
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let compile_ms = *runner.last_compile_ms.borrow();
    let mut bed = String::new();
    let reported = match &result {
        IntervalResult::Overlap(o) => {
            for (r, _) in ra.iter().zip(o).filter(|(_, hit)| **hit) {
                let _ = writeln!(bed, "{}", r.text);
            }
            o.iter().filter(|h| **h).count()
        }
        IntervalResult::Count(k) => {
            for (r, n) in ra.iter().zip(k) {
                let _ = writeln!(bed, "{}\t{n}", r.text);
            }
            ra.len()
        }
        IntervalResult::Join(p) => {
            for &(i, j) in p {
                let _ = writeln!(bed, "{}\t{}", ra[i].text, rb[j].text);
            }
            p.len()
        }
    };
    let mut out = String::new();
    if a.show_program {
        let text = if a.naive {
            intervals::program_text(op)
        } else {
            intervals::grid_program_text(op)
        };
        for l in text.lines() {
            let _ = writeln!(out, "# {l}");
        }
    }
    if let Some(path) = &a.out {
        tessera::io::write_atomic(Path::new(path), |w| {
            w.write_all(bed.as_bytes())
                .map_err(|e| tessera::error::Error::io(path, e))
        })?;
    }
    if a.json {
        let line = serde_json::json!({
            "op": format!("{:?}", a.op).to_lowercase(),
            "a": a.a,
            "b": a.b,
            "a_records": ra.len(),
            "b_records": rb.len(),
            "chromosomes": names.len(),
            "lines": reported,
            "overlapping_pairs": match &result {
                IntervalResult::Count(k) => Some(k.iter().sum::<i64>()),
                IntervalResult::Join(p) => Some(p.len() as i64),
                IntervalResult::Overlap(_) => None,
            },
            "compile_ms": compile_ms,
            "total_ms": ms,
            "backend": a.backend,
            "program": if a.naive { "naive" } else { "grid" },
        });
        let _ = writeln!(out, "{line}");
    } else if a.out.is_none() {
        out.push_str(&bed);
    }
    Ok(out)
}

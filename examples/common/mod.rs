//! What the continuous-study examples share: their command line, a seeded uniform generator
//! (the peers' scripts get the same data through `--dump`), and the median of timings.

use tessera::error::{Error, Result};

#[allow(dead_code)] // only the gradient workloads use it
pub mod grad_study;

/// The command line of a study: positional numbers, `--dump DIR`, `--backend jit|c`,
/// `--schedule TEXT`, `--grad-schedule TEXT` and the flag `--check` (the gradient workloads compare with finite
/// differences).
pub struct Args {
    plain: Vec<String>,
    pub dump: Option<String>,
    pub backend: Option<String>,
    #[allow(dead_code)] // only the gradient workloads read it
    pub check: bool,
    /// `--schedule TEXT`: schedule commands applied to the study's program before it runs
    /// (the gradient workloads: before `grad`, whose backward loops keep the marks they can).
    #[allow(dead_code)] // only the gradient workloads read it
    pub schedule: Option<String>,
    /// `--grad-schedule TEXT`: schedule commands applied to the gradient program itself
    /// (its loops as `tessera grad --show-program` prints them).
    #[allow(dead_code)] // only the gradient workloads read it
    pub grad_schedule: Option<String>,
    /// `--a FILE --b FILE`: input files instead of generated data.
    #[allow(dead_code)] // only the interval study reads files
    pub files: (Option<String>, Option<String>),
}

/// Options without a value.
const FLAGS: &[&str] = &["--check"];

impl Args {
    pub fn from_env() -> Args {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let option = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .map(|k| args.get(k + 1).cloned().unwrap_or_default())
        };
        let plain = args
            .iter()
            .enumerate()
            .filter(|(k, a)| {
                let value_of_option = *k > 0
                    && args[k - 1].starts_with("--")
                    && !FLAGS.contains(&args[k - 1].as_str());
                !(a.starts_with("--") || value_of_option)
            })
            .map(|(_, a)| a.clone())
            .collect();
        Args {
            plain,
            dump: option("--dump"),
            backend: option("--backend"),
            check: args.iter().any(|a| a == "--check"),
            schedule: option("--schedule"),
            grad_schedule: option("--grad-schedule"),
            files: (option("--a"), option("--b")),
        }
    }

    /// Positional argument `k` (0-based), or `default`.
    pub fn num<T: std::str::FromStr>(&self, k: usize, default: T) -> Result<T> {
        self.plain.get(k).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| Error::Usage(format!("argument {}: cannot read `{s}`", k + 1)))
        })
    }
}

impl Args {
    /// The runner `--backend` names: the JIT (default) or the C backend.
    #[allow(dead_code)] // not every study offers the choice
    pub fn runner(&self) -> Result<tessera::run::Runner> {
        match self.backend.as_deref() {
            None | Some("jit") => Ok(tessera::run::Runner::jit()),
            Some("c") => {
                let c = tessera::backend::CBackend::new();
                if !c.compiler_available() {
                    return Err(Error::Usage(
                        "--backend c: no C compiler (cc or $CC)".into(),
                    ));
                }
                Ok(tessera::run::Runner::new(Box::new(c)))
            }
            Some(other) => Err(Error::Usage(format!("--backend {other}: jit or c"))),
        }
    }
}

/// A seeded uniform generator in `[0, 1)` (splitmix64).
pub struct Uniform(pub u64);

impl Uniform {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

//! What the continuous-study examples share: their command line, a seeded uniform generator
//! (the peers' scripts get the same data through `--dump`), and the median of timings.

use tessera::error::{Error, Result};

/// The command line of a study: positional numbers, and `--dump DIR`.
pub struct Args {
    plain: Vec<String>,
    pub dump: Option<String>,
}

impl Args {
    pub fn from_env() -> Args {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let dump = args
            .iter()
            .position(|a| a == "--dump")
            .map(|k| args.get(k + 1).cloned().unwrap_or_default());
        let plain = args
            .iter()
            .enumerate()
            .filter(|(k, a)| {
                let value_of_dump = *k > 0 && args[k - 1] == "--dump";
                !(a.starts_with("--") || value_of_dump)
            })
            .map(|(_, a)| a.clone())
            .collect();
        Args { plain, dump }
    }

    /// Positional argument `k` (0-based), or `default`.
    pub fn num<T: std::str::FromStr>(&self, k: usize, default: T) -> Result<T> {
        self.plain.get(k).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| Error::Usage(format!("argument {}: cannot read `{s}`", k + 1)))
        })
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

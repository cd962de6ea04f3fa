//! The command line of `tessera-mpi` (and so of `tessera dist`):
//! `spmv|spgemm|bfs --in NAME=PATH... --out NAME=PATH... [--format F] [--json] ...`.

use tessera::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Spmv,
    Spgemm,
    Bfs,
}

#[derive(Clone, Debug)]
pub struct Args {
    pub command: Command,
    pub inputs: Vec<(String, String)>,
    pub outputs: Vec<(String, String)>,
    /// The Tessera format of each rank's blocks.
    pub format: Option<String>,
    pub json: bool,
    pub repeat: usize,
    pub warmup: usize,
    pub source: usize,
    pub backend: String,
    /// BFS: push, pull or auto (direction-optimizing, the default).
    pub direction: String,
    /// `--read parallel`: every rank parses its byte range of the matrix files.
    pub parallel_read: bool,
    /// `--max-memory BYTES`: this rank's limit on any one tensor or buffer (the core's
    /// `memory::set_max_memory`); without it, the memory the machine has available.
    pub max_memory: Option<u64>,
}

pub const USAGE: &str = "usage: tessera dist spmv --in A=PATH [--in x=PATH] [--out y=PATH.npy]
       tessera dist spgemm --in A=PATH [--in B=PATH] [--out C=PATH.mtx]
       tessera dist bfs --in A=PATH [--source S] [--direction push|pull|auto] [--out parents=PATH.npy] [--out dist=PATH.npy]
  common: [--format FORMAT] [--read root|parallel] [--json] [--repeat N] [--warmup W] [--backend tiered|jit|c] [--max-memory BYTES]
  run under MPI: mpirun -np P tessera dist ...";

fn pair(flag: &str, s: &str) -> Result<(String, String)> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.to_string(), p.to_string())),
        _ => Err(Error::Usage(format!("{flag} {s}: expected NAME=PATH"))),
    }
}

fn number(flag: &str, s: Option<&String>) -> Result<usize> {
    s.and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::Usage(format!("{flag} needs a non-negative integer")))
}

pub fn parse(argv: &[String]) -> Result<Args> {
    let command = match argv.first().map(String::as_str) {
        Some("spmv") => Command::Spmv,
        Some("spgemm") => Command::Spgemm,
        Some("bfs") => Command::Bfs,
        Some(other) => {
            return Err(Error::Usage(format!(
                "unknown command `{other}` (spmv, spgemm or bfs)\n{USAGE}"
            )));
        }
        None => return Err(Error::Usage(USAGE.into())),
    };
    let mut a = Args {
        command,
        inputs: vec![],
        outputs: vec![],
        format: None,
        json: false,
        repeat: 1,
        warmup: 0,
        source: 0,
        backend: "tiered".into(),
        direction: "auto".into(),
        parallel_read: false,
        max_memory: None,
    };
    let allowed: &[&str] = match command {
        Command::Spmv => &["A", "x"],
        Command::Spgemm => &["A", "B"],
        Command::Bfs => &["A"],
    };
    let outs: &[&str] = match command {
        Command::Spmv => &["y"],
        Command::Spgemm => &["C"],
        Command::Bfs => &["parents", "dist"],
    };
    let mut it = argv[1..].iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| Error::Usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--in" => {
                let (n, p) = pair(flag, value()?)?;
                if !allowed.contains(&n.as_str()) {
                    return Err(Error::Usage(format!(
                        "--in {n}: this command reads {}",
                        allowed.join(", ")
                    )));
                }
                if a.inputs.iter().any(|(m, _)| *m == n) {
                    return Err(Error::Usage(format!("--in {n} is given twice")));
                }
                a.inputs.push((n, p));
            }
            "--out" => {
                let (n, p) = pair(flag, value()?)?;
                if !outs.contains(&n.as_str()) {
                    return Err(Error::Usage(format!(
                        "--out {n}: this command writes {}",
                        outs.join(", ")
                    )));
                }
                if a.outputs.iter().any(|(m, _)| *m == n) {
                    return Err(Error::Usage(format!("--out {n} is given twice")));
                }
                a.outputs.push((n, p));
            }
            "--format" => a.format = Some(value()?.clone()),
            "--read" => {
                a.parallel_read = match value()?.as_str() {
                    "root" => false,
                    "parallel" => true,
                    other => {
                        return Err(Error::Usage(format!(
                            "--read {other}: root (rank 0 reads and scatters) or parallel"
                        )));
                    }
                }
            }
            "--max-memory" => {
                let v = value()?;
                a.max_memory = Some(
                    tessera::memory::parse_size(v)
                        .map_err(|e| Error::Usage(format!("--max-memory {v}: {e}")))?,
                );
            }
            "--json" => a.json = true,
            "--repeat" => a.repeat = number(flag, Some(value()?))?.max(1),
            "--warmup" => a.warmup = number(flag, Some(value()?))?,
            "--source" => a.source = number(flag, Some(value()?))?,
            "--backend" => {
                let b = value()?.clone();
                if !matches!(b.as_str(), "tiered" | "jit" | "c") {
                    return Err(Error::Usage(format!(
                        "unknown backend `{b}` (tiered, jit or c)"
                    )));
                }
                a.backend = b;
            }
            "--direction" if command == Command::Bfs => {
                let d = value()?.clone();
                if !matches!(d.as_str(), "push" | "pull" | "auto") {
                    return Err(Error::Usage(format!("--direction {d}: push, pull or auto")));
                }
                a.direction = d;
            }
            other => {
                return Err(Error::Usage(format!("unknown option `{other}`\n{USAGE}")));
            }
        }
    }
    if a.input("A").is_none() {
        return Err(Error::Usage("the matrix is required: --in A=PATH".into()));
    }
    Ok(a)
}

impl Args {
    pub fn input(&self, name: &str) -> Option<&str> {
        self.inputs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_str())
    }

    pub fn output(&self, name: &str) -> Option<&str> {
        self.outputs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_and_refuses() {
        let a = args("spmv --in A=a.mtx --in x=x.npy --out y=y.npy --json --repeat 5").unwrap();
        assert_eq!(a.input("x"), Some("x.npy"));
        assert_eq!((a.json, a.repeat), (true, 5));
        assert!(args("spmv --in B=a.mtx").is_err());
        assert!(args("bfs --in A=a.mtx --out y=y.npy").is_err());
        assert!(args("spmv --in x=x.npy").is_err());
        assert!(args("spgemm --in A=a --in A=b").is_err());
        assert!(args("nope").is_err());
        let a = args("spgemm --in A=a.mtx --max-memory 64K").unwrap();
        assert_eq!(a.max_memory, Some(64 * 1024));
        assert!(args("spgemm --in A=a.mtx --max-memory lots").is_err());
    }
}

//! `tessera grad PROGRAM --in ... --wrt A[,x] [--seed OUT=PATH] --out dA=PATH[@FORMAT]`: the
//! gradient of a program's loss (its 0-d output) or of its seeded outputs with respect to
//! some inputs, computed by the gradient program `transforms::grad` builds.

use super::{KernelArgs, MemoryArgs, OutSpec, once, split_format, split_name, with_origin};
use clap::Args;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use tessera::api::grad::{bind, finish, is_structured};
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::tensor::Tensor;
use tessera::tensor::files::OutputFile;
use tessera::transforms::grad::{GradOptions, Tapes, grad_with};

#[derive(Args, Debug)]
pub struct GradArgs {
    /// Program file, or the program text itself
    pub program: String,
    /// Input tensor: NAME=PATH[@FORMAT]
    #[arg(long = "in", value_name = "NAME=PATH[@FORMAT]")]
    pub inputs: Vec<String>,
    /// 0-d input: NAME=VALUE
    #[arg(long = "scalar", value_name = "NAME=VALUE")]
    pub scalars: Vec<String>,
    /// The inputs to differentiate, comma-separated
    #[arg(long, value_name = "A[,x]", value_delimiter = ',', required = true)]
    pub wrt: Vec<String>,
    /// The cotangent of an output: OUT=PATH[@FORMAT]; without seeds the loss is the
    /// program's 0-d output
    #[arg(long = "seed", value_name = "OUT=PATH[@FORMAT]")]
    pub seeds: Vec<String>,
    /// A gradient (`dA` for `A`) or a forward output to write: NAME[=PATH][@FORMAT]
    #[arg(long = "out", value_name = "NAME[=PATH][@FORMAT]")]
    pub outputs: Vec<String>,
    /// Which loop-body values to tape: `auto` (those computed by a loop; default), `all`, `none`
    #[arg(long, default_value = "auto")]
    pub tapes: String,
    /// Dense gradients for sparse inputs (default: only their stored entries, in their format)
    #[arg(long)]
    pub dense: bool,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift), `c` (C via the system compiler, cached on disk) or `eval`
    #[arg(long, default_value = "tiered")]
    pub backend: String,
    /// Print the gradient program first (as `#` comment lines)
    #[arg(long)]
    pub show_program: bool,
    /// Schedule commands applied to the forward program before it is differentiated,
    /// `;`-separated (`split(i, 4); reorder(f, i.1)`); the gradient program keeps its loops
    #[arg(long, value_name = "COMMANDS")]
    pub schedule: Option<String>,
    /// Schedule commands applied to the gradient program itself (its loops as
    /// `--show-program` prints them: `fission(f#2, after @31); vectorize(o#2)`), with the
    /// same dependence checks as `--schedule`
    #[arg(long, value_name = "COMMANDS")]
    pub grad_schedule: Option<String>,
    #[command(flatten)]
    pub memory: MemoryArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

pub fn grad(a: &GradArgs) -> Result<String> {
    let tapes = match a.tapes.as_str() {
        "auto" => Tapes::Auto,
        "all" => Tapes::All,
        "none" => Tapes::None,
        other => {
            return Err(Error::Usage(format!(
                "--tapes: unknown `{other}` (auto, all or none)"
            )));
        }
    };
    let runner = match a.backend.as_str() {
        "eval" => None,
        b => Some(super::compiling_runner(b, &a.kernel).map_err(|_| {
            Error::Usage(format!("unknown backend `{b}` (tiered, jit, c or eval)"))
        })?),
    };
    let (program, origin) = super::load_program(&a.program)?;
    let program = match &a.schedule {
        Some(text) => tessera::transforms::schedule::schedule(&program, text)
            .map_err(|e| with_origin(e, &origin))?,
        None => program,
    };
    let mut seen = HashMap::new();
    let mut tensors: BTreeMap<String, Tensor> = BTreeMap::new();
    for spec in &a.inputs {
        let (name, rest) = split_name(spec, "--in")?;
        once(&mut seen, name, "--in")?;
        let (path, fmt) = split_format(rest);
        tensors.insert(
            name.to_string(),
            tessera::tensor::files::load_tensor(path, fmt)?,
        );
    }
    for spec in &a.scalars {
        let (name, v) = split_name(spec, "--scalar")?;
        once(&mut seen, name, "--scalar")?;
        let v = super::parse_scalar(name, v)?;
        let f = Format::new(vec![tessera::levels::LevelKind::Element(v)])?;
        tensors.insert(name.to_string(), Tensor::empty(&f, &[])?);
    }
    let mut seeds = BTreeMap::new();
    for spec in &a.seeds {
        let (name, rest) = split_name(spec, "--seed")?;
        let (path, fmt) = split_format(rest);
        if seeds
            .insert(
                name.to_string(),
                tessera::tensor::files::load_tensor(path, fmt)?,
            )
            .is_some()
        {
            return Err(Error::Usage(format!("--seed {name} is given twice")));
        }
    }
    for w in &a.wrt {
        if !tensors.contains_key(w) {
            return Err(Error::Usage(format!(
                "--wrt {w}: `{w}` is not an input (give it with --in {w}=PATH)"
            )));
        }
    }
    let masked = if a.dense {
        vec![]
    } else {
        a.wrt
            .iter()
            .filter(|w| is_structured(&tensors[*w]))
            .cloned()
            .collect()
    };
    let wrt: Vec<&str> = a.wrt.iter().map(String::as_str).collect();
    let seed_names: Vec<&str> = seeds.keys().map(String::as_str).collect();
    let gp = grad_with(&program, &wrt, &seed_names, &GradOptions { tapes, masked })
        .map_err(|e| with_origin(e, &origin))?;
    let gp = match &a.grad_schedule {
        Some(text) => gp.scheduled(text).map_err(|e| with_origin(e, &origin))?,
        None => gp,
    };
    let ranks: HashMap<String, usize> = {
        let mut r = HashMap::new();
        tessera::notation::visit::accesses(&gp.program.body, &mut |acc| {
            r.entry(acc.tensor.clone()).or_insert(acc.indices.len());
        });
        r
    };
    let mut outs: BTreeMap<String, OutSpec> = BTreeMap::new();
    let mut formats = BTreeMap::new();
    for spec in &a.outputs {
        let (name, o) = super::parse_out(spec)?;
        let known = gp.gradients.iter().any(|(_, d)| *d == name) || gp.forward.contains(&name);
        if !known {
            let grads: Vec<&str> = gp.gradients.iter().map(|(_, d)| d.as_str()).collect();
            return Err(Error::Usage(format!(
                "--out {name}: neither a gradient ({}) nor an output of the program",
                grads.join(", ")
            )));
        }
        if let Some(f) = &o.format {
            formats.insert(
                name.clone(),
                Format::parse(f, ranks.get(&name).copied())
                    .map_err(|e| Error::Usage(format!("--out {name}: {e}")))?,
            );
        }
        if outs.insert(name.clone(), o).is_some() {
            return Err(Error::Usage(format!("--out {name} is given twice")));
        }
    }
    bind(&gp, &mut tensors, seeds, &formats).map_err(|e| with_origin(e, &origin))?;
    let mut files = vec![];
    for (n, o) in &outs {
        if let Some(p) = &o.path {
            let t = &tensors[n];
            files.push((n.clone(), OutputFile::create(p, &t.shape, t.fill())?));
        }
    }
    match runner {
        None => {
            super::eval::run_eval(&gp.program, &mut tensors).map_err(|e| with_origin(e, &origin))?
        }
        Some(r) => {
            let formats = tessera::api::formats_of(&tensors);
            let c = r
                .compile(&gp.program, &formats)
                .map_err(|e| with_origin(e, &origin))?;
            r.execute(&c, &mut tensors)?;
        }
    }
    finish(&gp, &mut tensors).map_err(|e| with_origin(e, &origin))?;
    let mut out = String::new();
    if a.show_program {
        for line in gp.program.to_string().lines() {
            let _ = writeln!(out, "# {line}");
        }
    }
    out.push_str(&super::write_outputs(&outs, files, &tensors)?);
    Ok(out)
}

//! Compiling and running programs: normalisation, shape inference, the kernel cache, and
//! moving tensors' arrays in and out of kernels.

use crate::backend::{Backend, CompiledKernel};
use crate::error::{Error, Result};
use crate::ir::Kernel;
use crate::levels::Format;
use crate::lower::{Layout, lower_program};
use crate::notation::ast::Program;
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use crate::transforms;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::Instant;

/// A compiled kernel with the layout its buffers follow.
pub struct Compiled {
    pub kernel: Box<dyn CompiledKernel>,
    pub layout: Layout,
    pub ir: Kernel,
    /// The source program, for checking the shapes of the tensors each run is given.
    pub program: Program,
    /// The kernel split around its top-level parallel loops, compiled, when it has any: what
    /// runs (with one thread or several). `kernel` is then the same segments run on the
    /// calling thread ([`crate::backend::parallel::OneThread`]): no unsplit twin is compiled.
    pub parallel: Option<Rc<crate::backend::parallel::Parallel>>,
    /// The tensors the program writes (run-length outputs merge their runs after each run).
    pub written: HashSet<String>,
    /// The integer scalars the shape check depends on ([`sizing_scalars`] of `program`).
    sizing: HashSet<String>,
    /// The shapes and integer scalars of the last run whose shape check passed: a run with the
    /// same ones skips the check, which costs more than a small kernel.
    checked: std::sync::Mutex<Option<ShapeKey>>,
    /// Per tensor of `layout.tensors`: whether the kernel writes it (`written`, looked up once
    /// here rather than hashed on every run).
    writes: Vec<bool>,
    /// The places in `layout.tensors` in the order of their names: a run finds its tensors in
    /// one ordered pass over the caller's map instead of a lookup per tensor and use.
    by_name: Vec<usize>,
    /// The places in `layout.tensors`, in name order, of the tensors named in `sizing`: the
    /// integer scalars a run by position ([`Runner::execute_at`]) compares with the last.
    sizing_at: Vec<usize>,
    /// The kernel's buffer table and dimension table of the last run (emptied), kept so a
    /// run allocates neither; a concurrent run of the same kernel makes its own.
    frame: std::sync::Mutex<(Vec<Buffer>, Vec<i64>)>,
    /// The position arrays ([`crate::ir::Vouched::Positions`], places in `layout.bounds`) of
    /// tensors the kernel only reads whose bound its versioned loops use
    /// (`backend::versioning::between_bounds`): a run hands the kernel a checked snapshot of
    /// such an array when it is foreign memory, which carries no bound ([`Snapshots`]).
    snapshot: Vec<usize>,
    /// The snapshots' allocations, one per entry of `snapshot`, kept between runs.
    scratch: std::sync::Mutex<Vec<Buffer>>,
}

impl Compiled {
    /// The names of the kernel's tensors in the order [`Runner::execute_at`] takes them (its
    /// parameter list: the layout's order).
    pub fn params(&self) -> impl Iterator<Item = &str> {
        self.layout.tensors.iter().map(|tl| tl.name.as_str())
    }

    /// The place of tensor `name` in [`Compiled::params`], if the kernel uses it.
    pub fn param(&self, name: &str) -> Option<usize> {
        self.by_name
            .binary_search_by(|&k| self.layout.tensors[k].name.as_str().cmp(name))
            .ok()
            .map(|i| self.by_name[i])
    }
}

/// What [`Runner::execute`] did for a [`Compiled`]'s position arrays in its last run (for
/// tests and the Python package's diagnostics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshots {
    /// `(tensor, level, buffer)` of each foreign position array the kernel read as a private
    /// copy, with the bound checked on that copy (`None`: the check failed, a negative
    /// element, and the kernel kept every bounds check).
    pub copied: Vec<Snapshot>,
}

/// One entry of [`Snapshots::copied`]: the tensor, the level, the buffer's place in the
/// level, and the bound checked on the copy.
pub type Snapshot = (String, usize, usize, Option<u64>);

/// What the shape check of a run depends on: each layout tensor's shape, in layout order, and
/// the values of the integer scalars (they may size loops), in name order.
type ShapeKey = (Vec<Option<Vec<usize>>>, Vec<(String, i64)>);

/// The names whose integer scalars may size the program's loops and outputs: those it reads
/// by their bare name (`for i = 0:m - 1` with `m` a 0-d input) and never writes. Shape
/// inference substitutes the values of names only (`transforms::dimensionalize`), never of
/// reads `m[]`, so a scalar read only as `m[]` (a search's bounds, `for x = lo[]:hi[]`, which
/// the kernel checks against the dimensions itself) cannot change what the check finds, and
/// a run that changes only such values skips it.
pub fn sizing_scalars(program: &Program) -> HashSet<String> {
    let (_, written) = crate::notation::visit::reads_writes(&program.body);
    let mut names = HashSet::new();
    crate::notation::visit::exprs(&program.body, &mut |e| {
        if let crate::notation::ast::ExprKind::Name(n) = &e.kind
            && !written.contains(n)
        {
            names.insert(n.clone());
        }
    });
    names
}

/// The integer scalars of `tensors` named in `sizing` ([`sizing_scalars`], in name order)
/// when they differ from `last`, else `None`: a run with the same scalars as the last one
/// allocates nothing here.
pub fn scalars_if_changed(
    last: Option<&[(String, i64)]>,
    sizing: &HashSet<String>,
    tensors: &BTreeMap<String, Tensor>,
) -> Option<Vec<(String, i64)>> {
    let scalars = || {
        tensors.iter().filter_map(|(n, t)| {
            if t.rank() != 0
                || t.elem().class() != crate::types::Class::Int
                || !sizing.contains(n.as_str())
            {
                return None;
            }
            Some((n, scalar_value(t)?))
        })
    };
    if let Some(last) = last {
        let mut now = scalars();
        let same = last
            .iter()
            .all(|(n, v)| now.next().is_some_and(|(m, w)| m == n && w == *v))
            && now.next().is_none();
        if same {
            return None;
        }
    }
    Some(scalars().map(|(n, v)| (n.clone(), v)).collect())
}

/// The value of a 0-d integer tensor, read from its one element (no walk of the levels).
fn scalar_value(t: &Tensor) -> Option<i64> {
    match (
        t.format.levels.as_slice(),
        t.levels.first().and_then(|l| l.first()),
    ) {
        ([crate::levels::LevelKind::Element(_)], Some(b)) if b.len() == 1 => {
            Some(b.get(0).as_i64())
        }
        _ => t.get(&[]).ok().map(|v| v.as_i64()),
    }
}

/// Normalise a program for tensors with these names: user reducers are attached to their
/// uses, windows and swizzles are compiled away, permissive indices become bounds checks, then
/// concordize, then lifecycle automation.
pub fn normalize(program: &Program, tensors: &HashSet<String>) -> Result<Program> {
    let p = transforms::resolve_reducers(program)?;
    let p = transforms::wrapperize(&p)?;
    let p = transforms::permissive(&p)?;
    let p = transforms::resolve_auto_extents(&p);
    let p = transforms::concordize(&p);
    transforms::lifecycle(&p, tensors)
}

/// Check the program's real loops against the formats (`transforms::real`) and give each real
/// `for x = _` the whole line, `-Inf:Inf`.
fn real_loops(program: &Program, formats: &BTreeMap<String, Format>) -> Result<Program> {
    use crate::notation::ast::{Extent, Stmt, StmtKind};
    let is_real = |t: &str, d: usize| {
        formats
            .get(t)
            .is_some_and(|f| f.real_dims().get(d) == Some(&true))
    };
    let class_of = |t: &str| formats.get(t).map(|f| f.elem().class());
    let dims = transforms::real::RealDims {
        is_real: &is_real,
        class_of: &class_of,
    };
    let loops = transforms::real::check_real(program, &dims)?;
    if !loops.any_real() {
        return Ok(program.clone());
    }
    fn walk(body: &[Stmt], loops: &transforms::real::RealLoops) -> Vec<Stmt> {
        body.iter()
            .map(|s| {
                let kind = match &s.kind {
                    StmtKind::Loop {
                        index,
                        extent,
                        body,
                        parallel,
                    } => {
                        let real = loops.kind_at(s.span) == Some(transforms::real::IndexKind::Real);
                        StmtKind::Loop {
                            index: index.clone(),
                            extent: match extent {
                                Extent::Auto if real => transforms::real::real_extent(s.span),
                                e => e.clone(),
                            },
                            body: walk(body, loops),
                            parallel: *parallel,
                        }
                    }
                    StmtKind::If {
                        cond,
                        then,
                        otherwise,
                    } => StmtKind::If {
                        cond: cond.clone(),
                        then: walk(then, loops),
                        otherwise: walk(otherwise, loops),
                    },
                    StmtKind::Let { name, value, body } => StmtKind::Let {
                        name: name.clone(),
                        value: value.clone(),
                        body: walk(body, loops),
                    },
                    StmtKind::Block(b) => StmtKind::Block(walk(b, loops)),
                    k => k.clone(),
                };
                Stmt { kind, span: s.span }
            })
            .collect()
    }
    Ok(program.with_body(walk(&program.body, &loops)))
}

/// The default kernel-size budget, in IR statements. The largest kernels of the examples and
/// studies are a few thousand; past ~10^4 Cranelift's register allocation and `cc -O3` take
/// seconds to minutes and gigabytes, so such a kernel is refused before it reaches a backend.
pub const DEFAULT_MAX_KERNEL_SIZE: usize = 8_000;

/// Kernels larger than this, in IR statements, are lowered again with their loop nests split
/// per independent statement (`lower::fission`), and the smaller kernel is kept. Below it a
/// shared loop (one pass over the operands) is worth its size.
pub const FISSION_ABOVE: usize = 4_000;

/// The values of the integer 0-d tensors `program` reads but never writes, which shape
/// inference may treat as constants (`for i = 0:m - 1` with `m` given as a scalar).
pub fn scalar_values(
    program: &Program,
    tensors: &BTreeMap<String, Tensor>,
) -> HashMap<String, i64> {
    let (_, written) = crate::notation::visit::reads_writes(&program.body);
    scalar_values_except(&written.into_iter().collect(), tensors)
}

/// The values of the integer 0-d tensors not in `written` (see [`scalar_values`]).
pub fn scalar_values_except(
    written: &HashSet<String>,
    tensors: &BTreeMap<String, Tensor>,
) -> HashMap<String, i64> {
    tensors
        .iter()
        .filter(|(n, t)| {
            t.rank() == 0
                && t.elem().class() == crate::types::Class::Int
                && !written.contains(n.as_str())
        })
        .filter_map(|(n, t)| Some((n.clone(), t.get(&[]).ok()?.as_i64())))
        .collect()
}

/// What a compiled kernel depends on: the program (structure and the places its faults name)
/// and the formats of its tensors. Compared structurally (the AST's and the formats' `Eq` and
/// `Hash`), never through their printed forms.
#[derive(Clone, PartialEq, Eq, Hash)]
struct KernelKey {
    program: Program,
    /// `(line, column)` of every node: the AST's equality ignores spans, a kernel does not.
    spans: Vec<(u32, u32)>,
    formats: BTreeMap<String, Format>,
}

impl KernelKey {
    fn new(program: &Program, formats: &BTreeMap<String, Format>) -> KernelKey {
        KernelKey {
            program: program.clone(),
            spans: crate::notation::visit::spans(program)
                .into_iter()
                .map(|s| (s.line, s.col))
                .collect(),
            formats: formats.clone(),
        }
    }
}

/// Compiles programs (cached by program and formats) and runs them on tensors.
pub struct Runner {
    backend: Box<dyn Backend>,
    cache: RefCell<HashMap<KernelKey, Rc<Compiled>>>,
    max_kernel_size: Cell<usize>,
    /// Threads parallel loops run on (1: the serial order, on the calling thread).
    threads: Cell<usize>,
    /// The least work a parallel range needs to run on several threads
    /// ([`crate::backend::parallel::MIN_PARALLEL_WORK`] unless set).
    min_parallel_work: Cell<u64>,
    /// How reductions of parallel ranges fold on several threads (copies or atomics).
    atomics: Cell<crate::backend::parallel::Atomics>,
    /// Time spent compiling by the last `compile` call (0 on a cache hit).
    pub last_compile_ms: RefCell<f64>,
    /// The position arrays the last `execute` snapshotted ([`Snapshots`]).
    last_snapshots: RefCell<Snapshots>,
}

impl Runner {
    pub fn new(backend: Box<dyn Backend>) -> Runner {
        Runner {
            backend,
            cache: RefCell::new(HashMap::new()),
            max_kernel_size: Cell::new(DEFAULT_MAX_KERNEL_SIZE),
            threads: Cell::new(default_threads()),
            min_parallel_work: Cell::new(crate::backend::parallel::MIN_PARALLEL_WORK),
            atomics: Cell::new(crate::backend::parallel::Atomics::Auto),
            last_compile_ms: RefCell::new(0.0),
            last_snapshots: RefCell::new(Snapshots::default()),
        }
    }

    pub fn jit() -> Runner {
        Runner::new(Box::new(crate::backend::Jit::new()))
    }

    /// The default backend of the command line: the JIT at once, C for kernels that prove hot
    /// ([`crate::backend::Tiered`]).
    pub fn tiered() -> Runner {
        Runner::new(Box::new(crate::backend::Tiered::new()))
    }

    /// The largest kernel, in IR statements, this runner hands to its backend.
    pub fn set_max_kernel_size(&self, statements: usize) {
        self.max_kernel_size.set(statements);
    }

    pub fn max_kernel_size(&self) -> usize {
        self.max_kernel_size.get()
    }

    /// Run parallel loops (`for i = parallel(_)`) on `threads` threads; 1 runs them in the
    /// serial order on the calling thread (the default is every core).
    pub fn set_threads(&self, threads: usize) {
        self.threads.set(threads.max(1));
    }

    /// A parallel range with less work than this (indices of the range, or stored entries
    /// when its loop drives the rows of a `Dense(SparseList)` input) runs as one chunk on the
    /// calling thread; 0 splits every range (for tests of the chunking on small inputs).
    pub fn set_min_parallel_work(&self, work: u64) {
        self.min_parallel_work.set(work);
    }

    /// How parallel ranges fold reductions that can be indivisible updates of the shared
    /// output on several threads: private copies while they pay, else atomics (`Auto`, the
    /// default), or always atomics, or never (`backend::parallel::Atomics`).
    pub fn set_atomics(&self, atomics: crate::backend::parallel::Atomics) {
        self.atomics.set(atomics);
    }

    pub fn atomics(&self) -> crate::backend::parallel::Atomics {
        self.atomics.get()
    }

    pub fn min_parallel_work(&self) -> u64 {
        self.min_parallel_work.get()
    }

    pub fn threads(&self) -> usize {
        self.threads.get()
    }

    pub fn cache_len(&self) -> usize {
        self.cache.borrow().len()
    }

    /// The foreign position arrays the last [`Runner::execute`] handed its kernel as checked
    /// private copies ([`Snapshots`]).
    pub fn last_snapshots(&self) -> Snapshots {
        self.last_snapshots.borrow().clone()
    }

    /// Lower a program for the given tensor formats (sorted by name for a stable layout).
    pub fn lower(
        program: &Program,
        formats: &BTreeMap<String, Format>,
    ) -> Result<(Kernel, Layout, Program)> {
        transforms::stack::fitting(program, || Runner::lower_fitted(program, formats))
    }

    fn lower_fitted(
        program: &Program,
        formats: &BTreeMap<String, Format>,
    ) -> Result<(Kernel, Layout, Program)> {
        if let Some(n) = formats.keys().find(|n| transforms::ein::is_reserved(n)) {
            return Err(transforms::ein::reserved_error(n));
        }
        // δ and ε first: every later stage sees ordinary tensors only.
        let lowered = transforms::ein::lower(program)?;
        let program = &lowered;
        // The static checks see the source program: normalisation rewrites accesses (a
        // repeated index becomes a loop over a dimension that must exist) and drops statements.
        let signatures = formats
            .iter()
            .map(|(n, f)| {
                let sig = transforms::check::Signature {
                    rank: f.rank(),
                    elem: f.elem(),
                };
                (n.clone(), sig)
            })
            .collect();
        let is_real = |t: &str, d: usize| {
            formats
                .get(t)
                .is_some_and(|f| f.real_dims().get(d) == Some(&true))
        };
        match formats.values().any(|f| f.is_real()) {
            true => transforms::check::check_with_real_dims(program, &signatures, &is_real)?,
            false => transforms::check::check(program, &signatures)?,
        }
        let resolved = lanes_for_formats(&real_loops(program, formats)?, formats);
        let program = &resolved;
        // The race check of parallel loops, always on (it names the access and the loop).
        let plans = race_check(program, formats)?;
        let names: HashSet<String> = formats.keys().cloned().collect();
        let normal = normalize(program, &names)?;
        let list: Vec<(String, Format)> = formats
            .iter()
            .map(|(n, f)| (n.clone(), f.clone()))
            .collect();
        // The shape check in `execute` holds these dimensions equal on every run.
        let equal = crate::lower::shapes::equal_dims(program);
        let (k, l) = lower_program(&normal, &list, &equal, &plans)?;
        // A large kernel is often statements multiplying each other's cases: lower them as
        // separate loops where that changes no result, if that is smaller.
        if k.size() > FISSION_ABOVE
            && let Some(split) = crate::lower::fission::distribute(program, formats)
        {
            let split_normal = normalize(&split, &names)?;
            let (k2, l2) = lower_program(&split_normal, &list, &equal, &plans)?;
            if k2.size() < k.size() {
                return Ok((k2, l2, split_normal));
            }
        }
        Ok((k, l, normal))
    }

    pub fn compile(
        &self,
        program: &Program,
        formats: &BTreeMap<String, Format>,
    ) -> Result<Rc<Compiled>> {
        let key = KernelKey::new(program, formats);
        if let Some(c) = self.cache.borrow().get(&key) {
            *self.last_compile_ms.borrow_mut() = 0.0;
            return Ok(c.clone());
        }
        transforms::stack::fitting(program, || self.compile_new(program, formats, key))
    }

    /// [`Runner::compile`] of a program not in the cache, under key `key`.
    fn compile_new(
        &self,
        program: &Program,
        formats: &BTreeMap<String, Format>,
        key: KernelKey,
    ) -> Result<Rc<Compiled>> {
        let t0 = Instant::now();
        // The shape checks of `execute` see the program without δ and ε too.
        let lowered = transforms::ein::lower(program)?;
        let program = &lowered;
        let (mut ir, layout, _) = Runner::lower(program, formats)?;
        crate::ir::promote::promote_scalars(&mut ir);
        check_kernel_size(&ir, program, self.max_kernel_size.get())?;
        // After the size check: it at most copies innermost loops once more, and programs
        // accepted before stay accepted.
        let passes = self.backend.passes();
        let lean = (passes == crate::backend::Passes::Both).then(|| {
            let mut lean = ir.clone();
            late_passes_with(&mut lean, false);
            lean
        });
        late_passes_with(&mut ir, passes != crate::backend::Passes::Lean);
        if let Err(e) = ir.check() {
            return Err(Error::Backend(format!("internal error: ill-typed IR: {e}")));
        }
        // A kernel with top-level parallel ranges is compiled as its split only: the segments
        // run it on one thread as well as on several (`backend::parallel::OneThread`).
        let parallel =
            crate::backend::parallel::Parallel::compile(self.backend.as_ref(), &ir)?.map(Rc::new);
        let kernel: Box<dyn crate::backend::CompiledKernel> = match &parallel {
            Some(p) => Box::new(crate::backend::parallel::OneThread(p.clone())),
            // Unsplit, every range runs as its serial loop: plain updates.
            None => {
                let mut plain = ir.clone();
                crate::ir::atomic::deatomize(&mut plain.body, &[]);
                match lean {
                    Some(mut lean) => {
                        crate::ir::atomic::deatomize(&mut lean.body, &[]);
                        self.backend.compile_with_lean(&lean, &plain)?
                    }
                    None => self.backend.compile(&plain)?,
                }
            }
        };
        *self.last_compile_ms.borrow_mut() = t0.elapsed().as_secs_f64() * 1e3;
        let (_, written) = crate::notation::visit::reads_writes(&program.body);
        let written: HashSet<String> = written.into_iter().collect();
        let snapshot = snapshot_slots(&ir, &layout, &written);
        let writes = layout
            .tensors
            .iter()
            .map(|tl| written.contains(&tl.name))
            .collect();
        let mut by_name: Vec<usize> = (0..layout.tensors.len()).collect();
        by_name.sort_by(|&a, &b| layout.tensors[a].name.cmp(&layout.tensors[b].name));
        // With its real `_` loops resolved to the whole line: the shape check of `execute`
        // then needs no direct use of a real index (`x[i + 0.5]` alone).
        let checked_program = real_loops(program, formats)?;
        let sizing = sizing_scalars(&checked_program);
        let sizing_at = by_name
            .iter()
            .copied()
            .filter(|&k| sizing.contains(&layout.tensors[k].name))
            .collect();
        let c = Rc::new(Compiled {
            kernel,
            layout,
            ir,
            sizing,
            sizing_at,
            program: checked_program,
            parallel,
            written,
            checked: std::sync::Mutex::new(None),
            writes,
            by_name,
            frame: std::sync::Mutex::new((vec![], vec![])),
            scratch: std::sync::Mutex::new(vec![Buffer::I64(vec![].into()); snapshot.len()]),
            snapshot,
        });
        self.cache.borrow_mut().insert(key, c.clone());
        Ok(c)
    }

    /// Run a compiled kernel on the tensors (every tensor of its layout must be present).
    ///
    /// The fixed cost of a call matters as much as the loop on small inputs (a 28x28 image,
    /// an 8x8 matrix), so nothing here allocates, hashes or prints per tensor on a run like
    /// the last one: the tensors are found in one ordered pass, the shape check is skipped
    /// when shapes and integer scalars are those of the last checked run (compared in place),
    /// and the buffer table is reused. Every check that keeps memory safe still runs: the
    /// backends check the buffers' element types and counts, and the bounds are re-read.
    /// [`Runner::execute_at`] is the same run on the tensors by position, without the map.
    pub fn execute(&self, c: &Compiled, tensors: &mut BTreeMap<String, Tensor>) -> Result<()> {
        let n = c.layout.tensors.len();
        let mut checked = c.checked.lock().unwrap_or_else(|e| e.into_inner());
        let scalars =
            scalars_if_changed(checked.as_ref().map(|k| k.1.as_slice()), &c.sizing, tensors);
        // The layout's tensors, by place, found in one pass over both name orders.
        let mut found: Vec<Option<&mut Tensor>> = Vec::with_capacity(n);
        found.resize_with(n, || None);
        let mut next = c.by_name.iter().peekable();
        for (name, t) in tensors.iter_mut() {
            while let Some(&&k) = next.peek() {
                match c.layout.tensors[k].name.as_str().cmp(name.as_str()) {
                    std::cmp::Ordering::Less => {
                        next.next();
                    }
                    std::cmp::Ordering::Equal => {
                        next.next();
                        found[k] = Some(t);
                        break;
                    }
                    std::cmp::Ordering::Greater => break,
                }
            }
        }
        // Shapes must agree (a loop's extent comes from one tensor; the others must match).
        check_shapes(c, &mut checked, scalars, |k| {
            found[k].as_ref().map(|t| t.shape.as_slice())
        })?;
        drop(checked);
        let mut found: Vec<&mut Tensor> = found
            .into_iter()
            .zip(&c.layout.tensors)
            .map(|(t, tl)| {
                let t = t.ok_or_else(|| {
                    Error::tensor(&tl.name, "is used by the program but was not given")
                })?;
                check_format(t, tl)?;
                Ok(t)
            })
            .collect::<Result<_>>()?;
        self.run_checked(c, &mut found)
    }

    /// [`Runner::execute`] on the kernel's tensors by position: `tensors[k]` is the tensor
    /// named [`Compiled::params`]`[k]` (the caller resolves the names once, e.g. when it
    /// prepares a call site, and keeps the slice between runs). No map is built or searched
    /// and nothing is allocated, hashed or printed on a run like the last one; every check of
    /// `execute` still runs: the number of tensors, each one's format (a changed format is an
    /// error naming the tensor, before anything moves), the shape check whenever a shape or a
    /// sizing integer scalar differs from the last checked run, the backends' checks of the
    /// buffers' element types and counts, and the bounds.
    pub fn execute_at(&self, c: &Compiled, tensors: &mut [Tensor]) -> Result<()> {
        let n = c.layout.tensors.len();
        if tensors.len() < n {
            return Err(Error::tensor(
                &c.layout.tensors[tensors.len()].name,
                format!(
                    "is used by the program but was not given ({} of the kernel's {n} tensors given by position)",
                    tensors.len()
                ),
            ));
        }
        if tensors.len() > n {
            return Err(Error::Usage(format!(
                "{} tensors given by position to a kernel of {n} ({})",
                tensors.len(),
                c.params().collect::<Vec<_>>().join(", ")
            )));
        }
        let mut checked = c.checked.lock().unwrap_or_else(|e| e.into_inner());
        let scalars = scalars_at_if_changed(checked.as_ref().map(|k| k.1.as_slice()), c, tensors);
        check_shapes(c, &mut checked, scalars, |k| {
            Some(tensors[k].shape.as_slice())
        })?;
        drop(checked);
        for (t, tl) in tensors.iter().zip(&c.layout.tensors) {
            check_format(t, tl)?;
        }
        self.run_checked(c, tensors)
    }

    /// The run itself, on the layout's tensors in place order, their shapes and formats
    /// checked: the arrays are lent to the kernel and given back, the outputs finished.
    fn run_checked<S: Slot>(&self, c: &Compiled, found: &mut [S]) -> Result<()> {
        let nbufs = c.ir.bufs.len();
        let (mut bufs, mut dims) =
            std::mem::take(&mut *c.frame.lock().unwrap_or_else(|e| e.into_inner()));
        // The checked bounds of coordinate arrays follow the dimensions; the last slot
        // receives the value a failing check reports (`Engine::detail`). The table is the
        // last run's allocation, refilled.
        dims.clear();
        dims.resize(c.layout.dims_len(), 0);
        for (k, at) in c.layout.bounds.iter().enumerate() {
            // A tensor the kernel writes vouches for nothing: its arrays change as it runs.
            if c.writes[at.tensor] {
                continue;
            }
            let below = found[at.tensor]
                .tensor()
                .levels
                .get(at.level)
                .and_then(|l| l.get(at.buf)?.below());
            dims[c.layout.bound_slot(k)] = below.map_or(0, |n| n.min(i64::MAX as u64) as i64);
        }
        bufs.clear();
        // The kernel's own buffers (`ir::lanes`' lane arrays) start empty, of their type (no
        // buffer holds points: `Kernel::check`).
        bufs.extend(c.ir.bufs.iter().map(|d| match d.elem {
            crate::types::ElemType::Limit => Buffer::I64(vec![].into()),
            elem => Buffer::new(elem),
        }));
        debug_assert_eq!(bufs.len(), nbufs);
        for ((tl, t), &writes) in c.layout.tensors.iter().zip(found.iter_mut()).zip(&c.writes) {
            let t = t.tensor();
            for (d, &n) in t.shape.iter().enumerate() {
                dims[tl.dims_slot + d] = n as i64;
            }
            if writes {
                t.unmark();
            }
            for (lk, ids) in tl.bufs.iter().enumerate() {
                for (bk, &id) in ids.iter().enumerate() {
                    bufs[id] = std::mem::replace(&mut t.levels[lk][bk], Buffer::I64(vec![].into()));
                }
            }
        }
        // Foreign position arrays (a SciPy matrix's `indptr` shared with NumPy) carry no bound:
        // their owner may rewrite them at any time, also while the kernel runs (the Python
        // package releases the GIL). The kernel reads a private copy instead, checked here,
        // so its loops over a fiber's entries run without bounds checks (`At::Between`: every
        // position it can read lies in the copy's `0..below`, and the entry arrays' lengths,
        // which the test compares `below` with, cannot change while they are lent). The copy
        // is O(fibers), against the O(entries) the checks cost.
        // The lock is held only to take and return allocations, so that runs of one kernel on
        // several threads do not wait for each other (a concurrent run allocates its own).
        let scratch = || c.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let mut lent_back: Vec<(usize, usize, Buffer)> = vec![];
        let mut copied = vec![];
        for (s, &k) in c.snapshot.iter().enumerate() {
            let at = &c.layout.bounds[k];
            let tl = &c.layout.tensors[at.tensor];
            let id = tl.bufs[at.level][at.buf];
            if bufs[id].below().is_some() || !bufs[id].is_foreign() {
                continue;
            }
            let mut copy = std::mem::replace(&mut scratch()[s], Buffer::I64(vec![].into()));
            bufs[id].copy_into(&mut copy);
            let below = copy.check_bounded().then(|| copy.below()).flatten();
            if let Some(n) = below {
                dims[c.layout.bound_slot(k)] = n.min(i64::MAX as u64) as i64;
            }
            copied.push((tl.name.clone(), at.level, at.buf, below));
            lent_back.push((s, id, std::mem::replace(&mut bufs[id], copy)));
        }
        {
            // Overwritten only when this or the last run copied something: an empty record is
            // left alone (nothing dropped or written on the common path).
            let mut last = self.last_snapshots.borrow_mut();
            if !(copied.is_empty() && last.copied.is_empty()) {
                *last = Snapshots { copied };
            }
        }
        bufs[0] = Buffer::I64(dims.into());
        let result = match &c.parallel {
            Some(p) => p.run(
                &mut bufs,
                self.threads.get(),
                self.min_parallel_work.get(),
                self.atomics.get(),
            ),
            None => c.kernel.run(&mut bufs),
        };
        // The tensors get their own (shared) arrays back; the copies' allocations wait for the
        // next run.
        if !lent_back.is_empty() {
            let mut scratch = scratch();
            for (s, id, original) in lent_back {
                scratch[s] = std::mem::replace(&mut bufs[id], original);
            }
        }
        // Give the arrays back even when the kernel failed, so inputs are never lost.
        for (tl, t) in c.layout.tensors.iter().zip(found.iter_mut()) {
            let t = t.tensor();
            for (lk, ids) in tl.bufs.iter().enumerate() {
                for (bk, &id) in ids.iter().enumerate() {
                    t.levels[lk][bk] = std::mem::replace(&mut bufs[id], Buffer::I64(vec![].into()));
                }
            }
        }
        // The dimension table and the buffer table's allocations wait for the next run; what
        // is left in the table (the kernel's own temporaries) is dropped now, as before.
        let dims = match std::mem::replace(&mut bufs[0], Buffer::I64(vec![].into())) {
            Buffer::I64(d) => d.into_vec(),
            _ => vec![],
        };
        bufs.clear();
        *c.frame.lock().unwrap_or_else(|e| e.into_inner()) = (bufs, dims);
        result.map_err(|e| {
            transforms::stack::fitting(&c.program, || {
                crate::explain::kernel_error(e, &c.program, &c.layout)
            })
        })?;
        // Only what the kernel wrote changes: the tensors it read are as they were given.
        for (t, _) in found.iter_mut().zip(&c.writes).filter(|(_, w)| **w) {
            let t = t.tensor();
            t.finish();
            // Run-length levels merge equal neighbouring runs after every kernel that wrote
            // them (the compiled freeze leaves them as written).
            t.merge_runs();
        }
        Ok(())
    }
}

/// A tensor in its place of a run: owned by the caller's slice ([`Runner::execute_at`]) or
/// borrowed from its map ([`Runner::execute`]); one run loop serves both.
trait Slot {
    fn tensor(&mut self) -> &mut Tensor;
}

impl Slot for Tensor {
    fn tensor(&mut self) -> &mut Tensor {
        self
    }
}

impl Slot for &mut Tensor {
    fn tensor(&mut self) -> &mut Tensor {
        self
    }
}

/// The shape check of a run: skipped when every layout tensor's shape (`shape_of(k)`, `None`
/// for one not given) and the sizing scalars (`scalars`, `None`: those of the last checked
/// run) are those of the last checked run, compared in place; else shape inference runs
/// and, when it passes, its inputs become the last checked run.
fn check_shapes<'t>(
    c: &Compiled,
    checked: &mut Option<ShapeKey>,
    scalars: Option<Vec<(String, i64)>>,
    shape_of: impl Fn(usize) -> Option<&'t [usize]>,
) -> Result<()> {
    let n = c.layout.tensors.len();
    let same_shapes = |key: &ShapeKey| {
        key.0.len() == n
            && key
                .0
                .iter()
                .enumerate()
                .all(|(k, a)| a.as_deref() == shape_of(k))
    };
    if scalars.is_none() && checked.as_ref().is_some_and(same_shapes) {
        return Ok(());
    }
    let shapes: Vec<Option<Vec<usize>>> =
        (0..n).map(|k| shape_of(k).map(<[usize]>::to_vec)).collect();
    let scalars = match scalars {
        Some(s) => s,
        None => checked.as_ref().map(|k| k.1.clone()).unwrap_or_default(),
    };
    let by_name: HashMap<String, Option<Vec<usize>>> = c
        .layout
        .tensors
        .iter()
        .zip(&shapes)
        .filter_map(|(tl, s)| s.as_ref().map(|s| (tl.name.clone(), Some(s.clone()))))
        .collect();
    let values: HashMap<String, i64> = scalars.iter().cloned().collect();
    transforms::stack::fitting(&c.program, || {
        transforms::infer_shapes_with(&c.program, &by_name, &values)
    })?;
    *checked = Some((shapes, scalars));
    Ok(())
}

/// The kernel reads and writes the arrays of the format it was compiled for (their number
/// per level, their element types, the fill value): another format is refused before
/// anything moves.
fn check_format(t: &Tensor, tl: &crate::lower::TensorLayout) -> Result<()> {
    if t.format != tl.format {
        return Err(Error::tensor(
            &tl.name,
            format!(
                "has the format {} but the kernel was compiled for {}",
                t.format, tl.format
            ),
        ));
    }
    Ok(())
}

/// [`scalars_if_changed`] for tensors by position ([`Runner::execute_at`]): the sizing
/// scalars among the kernel's tensors, in name order, when they differ from `last`.
fn scalars_at_if_changed(
    last: Option<&[(String, i64)]>,
    c: &Compiled,
    tensors: &[Tensor],
) -> Option<Vec<(String, i64)>> {
    let scalars = || {
        c.sizing_at.iter().filter_map(|&k| {
            let t = &tensors[k];
            if t.rank() != 0 || t.elem().class() != crate::types::Class::Int {
                return None;
            }
            Some((&c.layout.tensors[k].name, scalar_value(t)?))
        })
    };
    if let Some(last) = last {
        let mut now = scalars();
        let same = last
            .iter()
            .all(|(n, v)| now.next().is_some_and(|(m, w)| m == n && w == *v))
            && now.next().is_none();
        if same {
            return None;
        }
    }
    Some(scalars().map(|(n, v)| (n.clone(), v)).collect())
}

/// The places in `layout.bounds` of the position arrays a run snapshots when they are foreign
/// ([`Compiled::snapshot`]): positions of tensors the kernel does not write, whose bound some
/// versioned loop of `ir` rests on.
fn snapshot_slots(ir: &Kernel, layout: &Layout, written: &HashSet<String>) -> Vec<usize> {
    let used = crate::backend::versioning::between_bounds(ir);
    if used.is_empty() {
        return vec![];
    }
    layout
        .bounds
        .iter()
        .enumerate()
        .filter(|(k, at)| {
            // The kernel states the bound of slot `k` as a load of the dimensions buffer
            // (buffer 0) at that slot (`lower::lower_program`).
            let below = crate::ir::build::load(
                crate::ir::BufId(0),
                crate::ir::build::int(layout.bound_slot(*k) as i64),
            );
            at.what == crate::ir::Vouched::Positions
                && !written.contains(&layout.tensors[at.tensor].name)
                && used.contains(&below)
        })
        .map(|(k, _)| k)
        .collect()
}

/// How each tensor of these formats is stored, as far as the race check and vectorised
/// loops are concerned.
fn storage_of(
    formats: &BTreeMap<String, Format>,
) -> impl Fn(&str) -> transforms::parallel::Storage + '_ {
    use transforms::parallel::Storage;
    |t: &str| match formats.get(t) {
        None => Storage::Dense,
        Some(f)
            if f.levels.iter().all(|k| {
                matches!(
                    k,
                    crate::levels::LevelKind::Dense
                        | crate::levels::LevelKind::Element(_)
                        | crate::levels::LevelKind::Scalar { .. }
                )
            }) =>
        {
            Storage::Dense
        }
        Some(f) if crate::levels::row_appended_level(f).is_some() => Storage::Rows,
        Some(_) => Storage::Sparse,
    }
}

/// `program` with the vectorised loops these formats cannot run in lanes made serial
/// (`transforms::parallel::serial_where_formats_refuse`: a write at the coordinate a sparse
/// level's walk loads).
pub fn lanes_for_formats(program: &Program, formats: &BTreeMap<String, Format>) -> Program {
    transforms::parallel::serial_where_formats_refuse(program, &storage_of(formats))
}

/// The race check of a program's parallel loops for tensors of these formats
/// (`transforms::parallel`): per parallel loop, the outputs to privatise, or the
/// `Error::Race` naming the write; before it, the dependence check of vectorised loops
/// (`check_vector`), an `Error::Unsupported` naming the loop and the dependence. What
/// lowering runs; public so that the API can ask whether a loop it would mark parallel
/// passes before compiling anything.
pub fn race_check(
    program: &Program,
    formats: &BTreeMap<String, Format>,
) -> Result<Vec<transforms::parallel::Plan>> {
    transforms::parallel::check_vector(program)?;
    transforms::parallel::check_parallel(program, &storage_of(formats))
}

/// Every core the process may use.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Refuse a kernel over the size budget, naming the program's first loop (where the
/// multiplying splits happen) and what to do. Public for tools that lower without compiling
/// (`tessera code`), so they refuse what [`Runner::compile`] would.
pub fn check_kernel_size(ir: &Kernel, program: &Program, max: usize) -> Result<()> {
    let size = ir.size();
    if size <= max {
        return Ok(());
    }
    let span = program
        .body
        .iter()
        .find(|s| matches!(s.kind, crate::notation::ast::StmtKind::Loop { .. }))
        .or(program.body.first())
        .map(|s| s.span)
        // An empty program's kernel is its tensors' set-up: the place is the program's start.
        .unwrap_or(crate::span::Span::new(1, 1));
    Err(Error::unsupported(
        span,
        format!(
            "the kernel is {size} IR statements, over the limit of {max}: the loop's operands split it \
             into too many cases (each sparse, run-length or permissive operand coiterated with \
             the others multiplies the code); split the loop into several loops with fewer such \
             operands each, or raise the limit (`Runner::set_max_kernel_size`, `--max-kernel-size`)"
        ),
    ))
}

/// The passes after the kernel-size check, in order, for the runner and `tessera code` alike
/// (they at most copy innermost loops and row bodies a bounded number of times).
pub fn late_passes(ir: &mut crate::ir::Kernel) {
    late_passes_with(ir, true);
}

/// [`late_passes`], without row interleaving when `interleave` is false: the kernel a lean
/// first tier compiles ([`crate::backend::Backend::lean`]). Interleaving copies each row
/// loop into its paired, checked and unchecked versions, which multiplies a CSR SpMV's code
/// by about ten and Cranelift's compile time with it (3 ms -> 36 ms); the results and faults
/// are the same either way.
pub fn late_passes_with(ir: &mut crate::ir::Kernel, interleave: bool) {
    // First: an append's value slot filled and then overwritten is one store (a `SparseList`
    // output's entries), which the passes below then see as such.
    if std::env::var_os("TESSERA_NO_DEAD_FILLS").is_none() {
        crate::ir::dead_fill::drop_dead_fills(ir);
    }
    // Before versioning in the backends, which then sees the loop's buffers keep their
    // lengths.
    if std::env::var_os("TESSERA_NO_GROW_HOIST").is_none() {
        crate::ir::grow_hoist::hoist_growths(ir);
    }
    // Before the IEEE products: the fold loops it makes write no memory.
    crate::ir::distribute::distribute_loops(ir);
    // After distribution, whose store loops hold a jam's adjacent updates of one row.
    if std::env::var_os("TESSERA_NO_MERGE_STORES").is_none() {
        crate::ir::merge_stores::merge_stores(ir);
    }
    crate::ir::ieee_mul::ieee_products(ir);
    // Before interleaving, which copies the row bodies this rewrites.
    if std::env::var_os("TESSERA_NO_FILL_SINK").is_none() {
        crate::ir::fill_sink::sink_fills(ir);
    }
    // The rows of sliced levels in lanes: after the IEEE products, whose re-run each lane's
    // tail keeps, and before interleaving, whose row loops it would otherwise take.
    if interleave && std::env::var_os("TESSERA_NO_LANES").is_none() {
        crate::ir::lanes::slice_lanes(ir);
    }
    // After the passes that shape a row's loop (promotion, IEEE products), which it copies
    // whole per row.
    let rows = if interleave {
        crate::ir::interleave::rows()
    } else {
        1
    };
    crate::ir::interleave::interleave_rows(
        ir,
        rows,
        crate::ir::interleave::min_steps(),
        crate::ir::interleave::range(),
    );
    // After interleaving (whose row loops it leaves alone: their inner ranges are loaded) and
    // before hoisting, which would name the invariant parts of the rows' indices.
    crate::ir::jam::jam_rows(
        ir,
        if interleave {
            crate::ir::jam::rows()
        } else {
            1
        },
    );
    // Before hoisting: the loads and addresses it makes equal are hoisted once.
    if std::env::var_os("TESSERA_NO_RECHECK").is_none() {
        crate::ir::recheck::remove_rechecks(ir);
    }
    crate::ir::hoist::hoist_invariants(ir);
    // After hoisting, which moves invariant expressions (loads included) out of loops only
    // while they are not yet variables assigned in the loop; then `recheck` loads the named
    // repeats once.
    if std::env::var_os("TESSERA_NO_RECHECK").is_none()
        && std::env::var_os("TESSERA_NO_NAMED_LOADS").is_none()
    {
        crate::ir::values::name_repeated_loads(ir);
        crate::ir::recheck::remove_rechecks(ir);
        if std::env::var_os("TESSERA_NO_NAMED_VALUES").is_none() {
            crate::ir::values::name_repeated_values(ir);
        }
    }
    // Last: the passes above know nothing of the float variables it makes of points.
    crate::ir::exact_points::exact_points(ir);
    // After the passes that keep elements in variables (an accumulation kept in a register
    // is no shared update): the reductions of parallel ranges that could also be indivisible
    // updates of the shared outputs, for `backend::parallel` to choose.
    crate::ir::atomic::atomize_kernel(&mut ir.body);
}

#[cfg(test)]
mod cache_tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn formats(x: &str) -> BTreeMap<String, Format> {
        [
            ("x".to_string(), Format::parse(x, Some(1)).unwrap()),
            (
                "s".to_string(),
                Format::parse("Scalar(0.0)", Some(0)).unwrap(),
            ),
        ]
        .into()
    }

    #[test]
    fn kernels_are_cached_by_structure_places_and_formats() {
        let runner = Runner::jit();
        let sum = "s .= 0\nfor i = _\n  s[] += x[i]\nend\n";
        let dense = formats("Dense(Element(0.0))");
        // The same text parsed twice: one kernel.
        runner
            .compile(&parse_program(sum).unwrap(), &dense)
            .unwrap();
        runner
            .compile(&parse_program(sum).unwrap(), &dense)
            .unwrap();
        assert_eq!(runner.cache_len(), 1);
        // Another format: another kernel.
        let sparse = formats("SparseList(Element(0.0))");
        runner
            .compile(&parse_program(sum).unwrap(), &sparse)
            .unwrap();
        assert_eq!(runner.cache_len(), 2);
        // Equal ASTs written in other places: their faults name other places, another kernel.
        let moved = "s .= 0\nfor i = _\n    s[] += x[i]\nend\n";
        assert_eq!(parse_program(moved).unwrap(), parse_program(sum).unwrap());
        runner
            .compile(&parse_program(moved).unwrap(), &dense)
            .unwrap();
        assert_eq!(runner.cache_len(), 3);
        // Another literal: another kernel.
        let scaled = "s .= 0\nfor i = _\n  s[] += 2 * x[i]\nend\n";
        runner
            .compile(&parse_program(scaled).unwrap(), &dense)
            .unwrap();
        assert_eq!(runner.cache_len(), 4);
    }
}

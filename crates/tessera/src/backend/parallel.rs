//! Running a kernel split around its parallel ranges (`ir::split`) on a thread pool: the
//! serial segments run as ordinary kernels; each range is cut into chunks (about equal
//! numbers of stored entries when the range has weights, else equal index ranges; one per
//! thread when each chunk copies outputs or workspaces, else [`CHUNKS_PER_THREAD`] per thread,
//! which the threads take as they finish) that run at once, each with its own copy of the dimensions buffer (its fault slot), of the chunk
//! bounds and of the privatised outputs. The copies are folded into the outputs in chunk
//! order afterwards, and a failing chunk's fault (the first in chunk order) becomes the same
//! typed error the serial kernel raises: no panic crosses threads.
//!
//! A range with little work (fewer than the runner's threshold of indices, or of stored
//! entries when it has weights; [`MIN_PARALLEL_WORK`] by default) runs as one chunk on the
//! calling thread, writing the outputs directly (no private copies, no fold): waking the pool
//! and joining it costs more than such a range saves. With one chunk the segments run the
//! loop exactly as the unsplit kernel does, so a split kernel needs no serial twin.

use super::{Backend, CompiledKernel, check_buffers, native_fault};
use crate::error::Result;
use crate::ir::split::{Segment, Split, split};
use crate::ir::{BinOp, Chunked, Fold, Kernel, Private};
use crate::runtime::Buffer;
use crate::runtime::abi::{ChunkBuffers, run_native_chunk};
use crate::types::{ElemType, Scalar};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The least work (indices of the range, or stored entries when it has weights) worth running
/// on several threads. Below it a range runs as one chunk on the calling thread.
///
/// Measured on the 2-core development machine (`cargo run --release --example
/// parallel_threshold`, BENCHMARKS.md "Automatic parallel loops"): going parallel costs 17-20
/// µs per call there (waking the pool's sleeping thread, the join, the private copies, the
/// segments' environment), while a CSR SpMV entry costs 0.66 ns in C and 2.2 ns on the JIT at
/// in-cache sizes. Two chunks save half the work, so they pay once `work * c / 2` exceeds that
/// cost: from about 15 000 entries on the JIT and 52 000 in C. The threshold lies between
/// (iterations costlier than an entry, like a dense row of an SpMM, pass it sooner in time but
/// not in count, so the rule errs towards serial).
pub const MIN_PARALLEL_WORK: u64 = 40_000;

/// How a parallel range whose reductions can be made indivisible (`ir::Private::atomic`)
/// folds them when it runs on several threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Atomics {
    /// Private copies while they pay (the cost rule of [`useful_threads`]); when copies would
    /// cost more than the threads save (outputs much longer than the range's work: the
    /// distances of a relaxation round over a few thousand edges), the chunks update the
    /// shared outputs of idempotent reducers ([`cheap_when_shared`]) indivisibly instead, no
    /// copy to fill and fold, if the range's work still warrants threads.
    #[default]
    Auto,
    /// Always the indivisible updates, any reducer (whenever the range runs on several
    /// threads).
    Always,
    /// Always private copies (the behaviour before atomics existed).
    Never,
}

thread_local! {
    /// Ranges this thread ran with atomic updates of shared outputs (see [`shared_ranges`]).
    static SHARED_RANGES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Ranges this thread ran on several threads (see [`split_ranges`]).
    static SPLIT_RANGES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many parallel ranges the calling thread has run so far on more than one thread (the
/// thread count [`useful_threads`] chose): what the tests check that decision by.
pub fn split_ranges() -> u64 {
    SPLIT_RANGES.with(|c| c.get())
}

/// How many parallel ranges the calling thread has run so far with their chunks updating
/// shared outputs atomically rather than copies: what the tests check the choice by.
pub fn shared_ranges() -> u64 {
    SHARED_RANGES.with(|c| c.get())
}

/// Whether shared atomic updates with `fold` are cheap enough for `Atomics::Auto`: those of
/// an idempotent reducer (`min max & |`) mostly leave the element as it is (a relaxation's
/// distances that do not improve, a flag already set), and store nothing then, so most cost
/// a load and a compare; every `+` or `*` is a locked instruction (a compare-and-swap loop
/// for floats), which on the 2-core development machine made a push sum on 2 threads slower
/// than the serial loop (BENCHMARKS.md, "Atomic folds").
pub fn cheap_when_shared(fold: Fold) -> bool {
    matches!(
        fold,
        Fold::Op(BinOp::Min | BinOp::Max | BinOp::And | BinOp::Or)
    )
}

/// A kernel compiled as the segments of its split.
pub struct Parallel {
    split: Split,
    /// The segments' code, every update plain (`ir::deatomize`): serial segments, ranges
    /// run as one chunk, and chunks with private copies share no element with another thread.
    segments: Vec<Box<dyn CompiledKernel>>,
    /// Per segment, for a range with atomic privates: its chunks' code with those outputs'
    /// updates indivisible, which the chunks run on the shared outputs.
    atomic: Vec<Option<Box<dyn CompiledKernel>>>,
    /// Fragments of earlier calls, emptied but keeping their memory, for the next call's
    /// chunks to append into ([`SPARE_FRAGMENTS`] at most). A fresh fragment grows by
    /// reallocation from nothing, and every page it touches is a page fault: on ca-HepPh's
    /// C = A A on 2 threads the second thread spent about a fifth of its time in the kernel's
    /// page-fault path growing its fragment, which the first chunk (appending into the
    /// outputs' own arrays, which keep their memory between calls) did not.
    spare: Mutex<Vec<Buffer>>,
}

/// How many emptied fragments a [`Parallel`] keeps for its next calls: a few per output
/// array and thread; more would keep memory that no call uses.
const SPARE_FRAGMENTS: usize = 64;

/// The least number of bytes a join of fragments ([`stitch`]) copies on several threads:
/// below it, waking the pool's workers costs more than the copy (a copy of 1 MiB takes about
/// 100 µs on the development machine, a wake-up 17-100 µs).
const PARALLEL_JOIN_BYTES: usize = 1 << 20;

impl Parallel {
    /// Compile the segments of `k`'s split, or `None` if it has no top-level parallel range
    /// or cannot be split (see `ir::split`).
    pub fn compile(backend: &dyn Backend, k: &Kernel) -> Result<Option<Parallel>> {
        let Some(split) = split(k) else {
            return Ok(None);
        };
        let plain = |k: &Kernel, keep: &[crate::ir::BufId]| {
            let mut k = k.clone();
            crate::ir::atomic::deatomize(&mut k.body, keep);
            backend.compile(&k)
        };
        let segments = split
            .segments
            .iter()
            .map(|s| match s {
                Segment::Serial(k) | Segment::Chunks { kernel: k, .. } => plain(k, &[]),
            })
            .collect::<Result<_>>()?;
        // The atomic twin is compiled at once (a backend is not kept to compile it later);
        // only ranges with an atomic private have one.
        let atomic = split
            .segments
            .iter()
            .map(|s| match s {
                Segment::Chunks { kernel, range, .. } => {
                    let keep: Vec<_> = range
                        .private
                        .iter()
                        .filter(|p| p.atomic)
                        .map(|p| p.buf)
                        .collect();
                    (!keep.is_empty()).then(|| plain(kernel, &keep)).transpose()
                }
                Segment::Serial(_) => Ok(None),
            })
            .collect::<Result<_>>()?;
        Ok(Some(Parallel {
            split,
            segments,
            atomic,
            spare: Mutex::new(vec![]),
        }))
    }

    /// The kernels of the segments, in order (for printing).
    pub fn split(&self) -> &Split {
        &self.split
    }

    /// Run on the original kernel's buffers with up to `threads` threads at once; a range
    /// with less than `min_work` (indices, or entries when weighted) runs as one chunk on the
    /// calling thread, as does every range with one thread.
    pub fn run(
        &self,
        bufs: &mut Vec<Buffer>,
        threads: usize,
        min_work: u64,
        atomics: Atomics,
    ) -> Result<()> {
        let n = bufs.len();
        for (d, len) in &self.split.extra {
            bufs.push(Buffer::filled(d.elem, *len, Scalar::zero(d.elem)));
        }
        let r = self.run_segments(bufs, threads.max(1), min_work, atomics);
        bufs.truncate(n);
        r
    }

    /// Compile-time work still to come on the segments (the tiered backend's optimised tier).
    pub fn settle(&self) {
        self.segments.iter().for_each(|s| s.settle());
    }

    /// The tier the chunk segments run on (the first one's; the serial segments are small).
    pub fn tier(&self) -> &'static str {
        self.split
            .segments
            .iter()
            .zip(&self.segments)
            .find(|(s, _)| matches!(s, Segment::Chunks { .. }))
            .map_or("interp", |(_, c)| c.tier())
    }

    fn run_segments(
        &self,
        bufs: &mut [Buffer],
        threads: usize,
        min_work: u64,
        atomics: Atomics,
    ) -> Result<()> {
        let env_i64 = self.split.chunk_buf.0 as usize - 3;
        for ((seg, compiled), atomic) in self
            .split
            .segments
            .iter()
            .zip(&self.segments)
            .zip(&self.atomic)
        {
            match seg {
                Segment::Serial(_) => compiled.run(bufs)?,
                Segment::Chunks {
                    kernel,
                    lo_slot,
                    hi_slot,
                    range,
                    rows,
                    scratch_state,
                } => {
                    // The schedule's choice for this loop (`parallelize(i, atomics)`) wins.
                    let atomics = match range.atomics {
                        Some(true) => Atomics::Always,
                        Some(false) => Atomics::Never,
                        None => atomics,
                    };
                    let env = bufs[env_i64].as_i64().unwrap_or(&[]);
                    let (Some(&lo), Some(&hi)) = (env.get(*lo_slot), env.get(*hi_slot)) else {
                        continue;
                    };
                    if lo > hi {
                        continue;
                    }
                    // Fragments start empty, so the chunks' appends concatenate into an
                    // output only when it holds no entry yet (declared just before, as
                    // usual); one written earlier in the kernel or reopened runs as one chunk.
                    let fresh = rows.iter().all(|&(c, _)| env.get(c) == Some(&0));
                    let weights = range.weights.and_then(|w| Weights::of(&bufs[w.0 as usize]));
                    let nested = range.nested.and_then(|n| {
                        Some(Nested {
                            crd: Weights::of(&bufs[n.crd.0 as usize])?,
                            ptr: Weights::of(&bufs[n.ptr.0 as usize])?,
                        })
                    });
                    // Elements copied per chunk: the private outputs and the workspaces, and
                    // those left when the privates `sharable` picks are shared instead.
                    let sharable = |p: &Private| {
                        atomic.is_some()
                            && p.atomic
                            && match atomics {
                                Atomics::Always => true,
                                Atomics::Auto => cheap_when_shared(p.fold),
                                Atomics::Never => false,
                            }
                    };
                    let copied = |shared: bool| -> u64 {
                        range
                            .private
                            .iter()
                            .filter(|p| !(shared && sharable(p)))
                            .map(|p| p.buf)
                            .chain(range.scratch.iter().copied())
                            .map(|b| bufs[b.0 as usize].len() as u64)
                            .sum()
                    };
                    let with_copies = |private| {
                        useful_threads(lo, hi, threads, weights, nested, private, min_work)
                    };
                    let any = range.private.iter().any(sharable);
                    let (threads, shared) = match (fresh, any, atomics) {
                        (false, _, _) => (1, false),
                        (true, true, Atomics::Always) => {
                            let t = with_copies(copied(true));
                            (t, t > 1)
                        }
                        // Copies first; atomics where copies would not pay but threads would.
                        (true, true, _) => match with_copies(copied(false)) {
                            1 => {
                                let t = with_copies(copied(true));
                                (t, t > 1)
                            }
                            t => (t, false),
                        },
                        (true, false, _) => (with_copies(copied(false)), false),
                    };
                    let private = copied(shared);
                    if shared {
                        SHARED_RANGES.with(|c| c.set(c.get() + 1));
                    }
                    let chunk = self.split.chunk_buf.0 as usize;
                    if threads == 1 {
                        // One chunk on this thread, straight into the outputs: the serial loop.
                        // It stores its variables into the environment, as a serial segment.
                        bufs[chunk] = Buffer::I64(vec![lo, hi].into());
                        compiled.run(bufs)?;
                        continue;
                    }
                    SPLIT_RANGES.with(|c| c.set(c.get() + 1));
                    let cuts = cut(lo, hi, chunk_count(threads, private), weights);
                    let code = match (shared, atomic) {
                        (true, Some(a)) => a.as_ref(),
                        _ => compiled.as_ref(),
                    };
                    let copies: Vec<Private> = range
                        .private
                        .iter()
                        .filter(|p| !(shared && sharable(p)))
                        .cloned()
                        .collect();
                    let mut parts =
                        self.chunks(code, kernel, range, &copies, &cuts, bufs, threads)?;
                    stitch(range, rows, &mut parts, bufs, env_i64, threads);
                    // The workspaces' state as the last chunk (the last iteration) left it.
                    if let Some(last) = parts.last() {
                        for &(t, slot) in scratch_state {
                            let v = last.env[t].get(slot);
                            bufs[env_i64 + t].set(slot, v);
                        }
                    }
                    // The later chunks' fragments, copied into place, serve the next call.
                    self.recycle(parts.into_iter().skip(1).flat_map(|f| f.parts));
                }
            }
        }
        Ok(())
    }

    /// An empty fragment of `elem`s, with the memory of an earlier call's if one is spare.
    fn spare_fragment(&self, elem: ElemType) -> Buffer {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        match spare.iter().position(|b| b.elem() == elem) {
            Some(k) => spare.swap_remove(k),
            None => Buffer::new(elem),
        }
    }

    /// Keep `parts` (fragments already joined into the outputs), emptied, for later calls.
    /// Emptied, they read as fresh ones: a kernel's `Grow` of one zeroes the elements it adds
    /// as for a new buffer, within the memory it already has.
    fn recycle(&self, parts: impl Iterator<Item = Buffer>) {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        for mut part in parts {
            if spare.len() >= SPARE_FRAGMENTS {
                break;
            }
            part.clear();
            spare.push(part);
        }
    }

    /// Run the chunks `cuts` of `range` with `compiled`, each with its own copies of the
    /// privates `copies` (all of the range's, or those left when the chunks update the atomic
    /// ones in place), folded into the outputs afterwards.
    #[allow(clippy::too_many_arguments)]
    fn chunks(
        &self,
        compiled: &dyn CompiledKernel,
        kernel: &Kernel,
        range: &Chunked,
        copies: &[Private],
        cuts: &[(i64, i64)],
        bufs: &mut [Buffer],
        threads: usize,
    ) -> Result<Vec<Fragments>> {
        let chunk_buf = self.split.chunk_buf.0 as usize;
        // The first chunk appends straight into the outputs' arrays (its fragment is their
        // prefix, the cursor starting at 0), so only the later chunks' entries are copied.
        let mut first_parts: Option<Vec<Buffer>> = Some(
            range
                .rows
                .iter()
                .flat_map(|r| &r.arrays)
                .map(|b| {
                    let real = &mut bufs[b.0 as usize];
                    let elem = real.elem();
                    std::mem::replace(real, Buffer::new(elem))
                })
                .collect(),
        );
        // Each chunk's own buffers, by number.
        let mut owns: Vec<Vec<(usize, Buffer)>> = cuts
            .iter()
            .map(|&(a, b)| {
                let mut own = vec![
                    (0, bufs[0].clone()),
                    (chunk_buf, Buffer::I64(vec![a, b].into())),
                ];
                // The environments, which the chunk stores its variables into at its end.
                for e in 0..3 {
                    own.push((chunk_buf - 3 + e, bufs[chunk_buf - 3 + e].clone()));
                }
                for p in copies {
                    let real = &bufs[p.buf.0 as usize];
                    let id = identity(real.elem(), p);
                    own.push((
                        p.buf.0 as usize,
                        Buffer::filled(real.elem(), real.len(), id),
                    ));
                }
                // Then the fragments of the appended outputs, empty (the chunk appends to
                // them from entry 0); the first chunk's are the outputs' arrays.
                let mut firsts = first_parts.take().map(Vec::into_iter);
                for r in &range.rows {
                    for b in &r.arrays {
                        let part = match firsts.as_mut().and_then(Iterator::next) {
                            Some(real) => real,
                            None => self.spare_fragment(bufs[b.0 as usize].elem()),
                        };
                        own.push((b.0 as usize, part));
                    }
                }
                // The workspaces after them: a copy as the buffer is (each iteration declares
                // it afresh), owned, since the chunk writes it through its view.
                for b in &range.scratch {
                    let mut copy = bufs[b.0 as usize].clone();
                    copy.make_owned();
                    own.push((b.0 as usize, copy));
                }
                own
            })
            .collect();
        let started = std::time::Instant::now();
        let codes: Vec<(i64, i64)> = match compiled.native() {
            Some(f) => {
                check_buffers(kernel, &kernel.modified_bufs(), bufs)?;
                let shared = ChunkBuffers {
                    shared: bufs
                        .iter_mut()
                        .map(|b| {
                            let view = crate::runtime::abi::view_of(b);
                            (b as *mut Buffer, view)
                        })
                        .collect(),
                };
                let job = Arc::new(Chunks {
                    f,
                    shared,
                    chunks: std::mem::take(&mut owns)
                        .into_iter()
                        .map(|own| Mutex::new((own, (0, 0))))
                        .collect(),
                    next: AtomicUsize::new(0),
                    finished: AtomicUsize::new(0),
                    panicked: std::sync::atomic::AtomicBool::new(false),
                    caller: std::thread::current(),
                });
                let pool = pool(threads - 1);
                // A new call ends the pool's spinning (below) so its workers take the chunks.
                let epoch = EPOCH.fetch_add(1, Ordering::SeqCst) + 1;
                // The calling thread and the pool's `threads - 1` threads take the chunks in
                // order, each the next one not yet taken, until none is left: a thread slowed
                // down (chunks with more work than their entries say, such as the unvisited
                // vertices of a BFS pull step bunched in one part of the range, or a core
                // shared with another process) takes fewer. The caller waits for the chunks,
                // not for the workers: one that wakes after every chunk was taken finds none
                // and returns, so a late wake-up costs nothing (waiting for a scope's jobs
                // cost a wake-up per call even when the caller had run every chunk).
                for _ in 0..(threads - 1).min(job.chunks.len() - 1) {
                    let job = job.clone();
                    pool.spawn(move || job.take());
                }
                job.take();
                job.wait();
                keep_awake(&pool, threads - 1, epoch);
                compiled.ran_natively(started.elapsed());
                if job.panicked.load(Ordering::Acquire) {
                    panic!("a chunk of a parallel range panicked");
                }
                let mut codes = vec![];
                for chunk in &job.chunks {
                    let (own, code) =
                        std::mem::take(&mut *chunk.lock().unwrap_or_else(|e| e.into_inner()));
                    owns.push(own);
                    codes.push(code);
                }
                codes
            }
            None => {
                // No native code (the interpreter): the chunks one after another, each on the
                // buffers with its own ones swapped in, which is the same split and folding.
                for own in &mut owns {
                    for (k, b) in own.iter_mut() {
                        std::mem::swap(&mut bufs[*k], b);
                    }
                    let r = compiled.run(bufs);
                    for (k, b) in own.iter_mut() {
                        std::mem::swap(&mut bufs[*k], b);
                    }
                    r?;
                }
                vec![(0, 0); owns.len()]
            }
        };
        let fragments = OWN_PRIVATE + copies.len();
        let arrays: usize = range.rows.iter().map(|r| r.arrays.len()).sum();
        for k in 0..owns.len() {
            if let Some(fault) = native_fault(codes[k].0, codes[k].1) {
                // The outputs' arrays, which the first chunk held, go back as it left them.
                for (b, part) in owns[0].drain(fragments..fragments + arrays) {
                    bufs[b] = part;
                }
                // The fault slot the failing chunk filled in.
                bufs[0] = std::mem::replace(&mut owns[k][0].1, Buffer::I64(vec![].into()));
                return Err(fault.to_error(kernel, bufs));
            }
        }
        for (i, p) in copies.iter().enumerate() {
            for own in &owns {
                let acc = &mut bufs[p.buf.0 as usize];
                match p.fold {
                    Fold::Op(op) => fold(acc, &own[OWN_PRIVATE + i].1, op),
                    Fold::Choose => fold_choose(acc, &own[OWN_PRIVATE + i].1, p.identity),
                }
            }
        }
        // The fragments, after the private copies, wait in each chunk's own buffers for the
        // runner to concatenate them; the chunk's environments say where each ended.
        // A workspace ends as the last iteration, which the last chunk ran, left it.
        if let Some(last) = owns.last_mut() {
            for (k, b) in last.drain(fragments + arrays..) {
                bufs[k] = b;
            }
        }
        Ok(owns
            .into_iter()
            .map(|mut own| {
                let parts = own
                    .drain(fragments..fragments + arrays)
                    .map(|p| p.1)
                    .collect();
                let env = own.drain(2..OWN_PRIVATE).map(|p| p.1).collect();
                Fragments { env, parts }
            })
            .collect())
    }
}

/// A chunk's own buffers, by buffer number.
type Own = Vec<(usize, Buffer)>;

/// The chunks of one call of a parallel range, shared by the calling thread and the pool's
/// workers, which take them in order (`next`) until none is left.
struct Chunks {
    f: crate::runtime::abi::KernelFn,
    shared: ChunkBuffers,
    /// Each chunk's own buffers and, once run, its status code and fault word. Each is locked
    /// by the one thread that took it, and by the caller after every chunk finished.
    chunks: Vec<Mutex<(Own, (i64, i64))>>,
    next: AtomicUsize,
    finished: AtomicUsize,
    panicked: std::sync::atomic::AtomicBool,
    /// The calling thread, woken when the last chunk finishes.
    caller: std::thread::Thread,
}

impl Chunks {
    /// Run chunks not yet taken until none is left.
    fn take(&self) {
        let n = self.shared.shared.len();
        while let Some(chunk) = self.chunks.get(self.next.fetch_add(1, Ordering::Relaxed)) {
            let mut chunk = chunk.lock().unwrap_or_else(|e| e.into_inner());
            let (own, code) = &mut *chunk;
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut slots: Vec<Option<&mut Buffer>> = (0..n).map(|_| None).collect();
                for (k, b) in own.iter_mut() {
                    slots[*k] = Some(b);
                }
                // SAFETY: `check_buffers` verified the types the code was generated for; the
                // chunks write shared buffers only at elements indexed by the parallel index
                // (the race check) or through indivisible updates (`ir::Stmt::Atomic`, which
                // the atomic twin alone holds, for outputs no other statement of the range
                // reads or writes: `ir::atomic`), never move them (`ir::split`), and the
                // caller touches none of them until every chunk has finished (`wait`); a
                // worker that starts later takes no chunk, so it never reaches the shared
                // pointers.
                unsafe { run_native_chunk(self.f, &self.shared, &mut slots) }
            }));
            match ran {
                Ok(c) => *code = c,
                Err(_) => self.panicked.store(true, Ordering::Release),
            }
            drop(chunk);
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.chunks.len() {
                self.caller.unpark();
            }
        }
    }

    /// Wait until every chunk has finished: awake for a while (sleeping and being woken costs
    /// as much as waking a worker), then parked until the last chunk's thread wakes it.
    fn wait(&self) {
        let done = || self.finished.load(Ordering::Acquire) == self.chunks.len();
        spin_until(done);
        while !done() {
            std::thread::park();
        }
    }
}

/// What a chunk appended to the sparse outputs whose rows it wrote (`Chunked::rows`).
struct Fragments {
    /// The chunk's environments (i64, f64, bool) as it ended: where each output's cursor and
    /// last fiber ended (the cursor is the fragment's length, as it started at 0), and the
    /// workspaces' state.
    env: Vec<Buffer>,
    /// Per output, per entry array, the chunk's fragment (grown past its length).
    parts: Vec<Buffer>,
}

/// Where a chunk's private copies start among its own buffers: after the dimensions, the
/// chunk bounds and the three environments.
const OWN_PRIVATE: usize = 5;

/// Concatenate the chunks' fragments of each appended output into its arrays in chunk order
/// (so entry `k` of chunk `c` lands after every entry of the chunks before it, as in the
/// serial loop; the first chunk's fragment is the arrays themselves), and set its cursor to
/// the total and its last fiber to the greatest any chunk reached, in `env_i64`, for the
/// segments after the range. The level's fiber positions need no shift: while written they
/// are per-fiber counts (SparseList's `ptr[p + 1]`) or slot numbers (SparseByteMap's `srt`),
/// which the freeze turns into offsets.
///
/// Every chunk's length is known once the chunks have run, so each later chunk's place is a
/// prefix sum; the copies into those places are disjoint, and with `threads` threads and at
/// least [`PARALLEL_JOIN_BYTES`] to move they are cut into `threads` equal spans copied at
/// once ([`run_spans`]). Which thread copies what does not change a byte of the result.
fn stitch(
    range: &Chunked,
    rows: &[(usize, Option<usize>)],
    chunks: &mut [Fragments],
    bufs: &mut [Buffer],
    env_i64: usize,
    threads: usize,
) {
    if chunks.is_empty() {
        return;
    }
    let mut joins = vec![];
    let mut first = 0;
    for (r, &(cursor, last)) in range.rows.iter().zip(rows) {
        let ends: Vec<(usize, i64)> = chunks
            .iter()
            .map(|c| {
                let e = c.env[0].as_i64().unwrap_or(&[]);
                (e[cursor].max(0) as usize, last.map_or(-1, |l| e[l]))
            })
            .collect();
        let total: usize = ends.iter().map(|e| e.0).sum();
        for (a, array) in r.arrays.iter().enumerate() {
            // The first chunk appended into the array itself.
            let elem = bufs[array.0 as usize].elem();
            let mut dst = std::mem::replace(&mut chunks[0].parts[first + a], Buffer::new(elem));
            if dst.len() < total {
                dst.resize(total, Scalar::zero(elem));
            }
            joins.push(Join {
                buf: array.0 as usize,
                dst,
                at: ends[0].0,
                part: first + a,
                lens: ends[1..].iter().map(|e| e.0).collect(),
            });
        }
        first += r.arrays.len();
        if let Some(env) = bufs[env_i64].as_i64_mut() {
            env[cursor] = total as i64;
            if let Some(l) = last {
                env[l] = ends.iter().map(|e| e.1).fold(env[l], i64::max);
            }
        }
    }
    let bytes: usize = joins
        .iter()
        .map(|j| j.lens.iter().sum::<usize>() * j.dst.elem().size())
        .sum();
    let spans = if threads > 1 && bytes >= PARALLEL_JOIN_BYTES {
        threads
    } else {
        1
    };
    let rest = &chunks[1..];
    let mut work: Vec<Vec<SpanCopy<'_>>> = (0..spans).map(|_| vec![]).collect();
    for j in &mut joins {
        let srcs: Vec<&Buffer> = rest.iter().map(|c| &c.parts[j.part]).collect();
        split_copies(&mut j.dst, j.at, &srcs, &j.lens, &mut work);
    }
    run_spans(work, threads);
    for j in joins {
        bufs[j.buf] = j.dst;
    }
}

/// One appended array being joined: its buffer number, the array (the first chunk's entries
/// first, grown to the total), where the later chunks' entries start, and which fragment of
/// each later chunk holds them, with their lengths.
struct Join {
    buf: usize,
    dst: Buffer,
    at: usize,
    part: usize,
    lens: Vec<usize>,
}

/// A piece of work for [`on_threads`] (a copy of one span of a joined array, a part's scan).
pub type Task<'a> = Box<dyn FnOnce() + Send + 'a>;

/// A copy of one span of a joined array, run by one thread.
type SpanCopy<'a> = Task<'a>;

/// Queue the copy of `srcs[c][..lens[c]]`, in order, into `dst[at..]`, cut into one span of
/// about equal length per entry of `work` (span `k` into `work[k]`). Each source holds at
/// least its length (the kernel grows an entry array before it writes entry `cursor` and
/// moves the cursor past it), and a fragment has the type of the array it was made for.
fn split_copies<'a>(
    dst: &'a mut Buffer,
    at: usize,
    srcs: &[&'a Buffer],
    lens: &[usize],
    work: &mut [Vec<SpanCopy<'a>>],
) {
    let total: usize = lens.iter().sum();
    if total == 0 {
        return;
    }
    let step = total.div_ceil(work.len()).max(1);
    macro_rules! queue {
        ($($v:ident),*) => {
            match dst {
                $(Buffer::$v(d) => {
                    let srcs: Vec<&[_]> = srcs
                        .iter()
                        .zip(lens)
                        .map(|(s, &len)| match s {
                            Buffer::$v(s) => &s[..len],
                            s => unreachable!("a fragment of {} for an array of {}", s.elem(), stringify!($v)),
                        })
                        .collect();
                    let d: &'a mut [_] = &mut d[at..at + total];
                    for (k, span) in d.chunks_mut(step).enumerate() {
                        let srcs = srcs.clone();
                        work[k].push(Box::new(move || copy_span(span, k * step, &srcs)));
                    }
                })*
            }
        };
    }
    queue!(F64, F32, I64, I32, I8, U8, U64, Bool)
}

/// `dst = concat(srcs)[from..from + dst.len()]`.
fn copy_span<T: Copy>(dst: &mut [T], from: usize, srcs: &[&[T]]) {
    let mut skip = from;
    let mut out = 0;
    for s in srcs {
        if out == dst.len() {
            break;
        }
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        let n = (s.len() - skip).min(dst.len() - out);
        dst[out..out + n].copy_from_slice(&s[skip..skip + n]);
        out += n;
        skip = 0;
    }
    debug_assert_eq!(out, dst.len());
}

/// Run `work[0]` on the calling thread and each other entry on one of the pool's workers
/// (all of it here when there is one entry), returning when all are done.
fn run_spans(work: Vec<Vec<SpanCopy<'_>>>, threads: usize) {
    on_threads(
        work.into_iter()
            .map(|w| Box::new(move || w.into_iter().for_each(|f| f())) as SpanCopy<'_>)
            .collect(),
        threads,
    )
}

/// Run the entries of `work` on the calling thread and the pool of `threads - 1` workers the
/// parallel ranges use, each entry once, returning when every entry has run: for a driver's
/// own passes between kernel calls (a graph round's scan of its distances, split by part),
/// which then find the workers still awake from the kernel's chunks. As with the chunks,
/// every thread takes the next entry not yet taken, so a worker that starts late (its core
/// busy with another process) leaves its entries to the calling thread instead of holding it
/// up; the call still returns only once each worker has started and found nothing left (the
/// scope keeps the entries' borrows alive until then). With one entry (or `threads` 1)
/// everything runs on the calling thread. A panic in an entry reaches the caller.
pub fn on_threads(work: Vec<Task<'_>>, threads: usize) {
    if work.len() <= 1 || threads <= 1 {
        work.into_iter().for_each(|f| f());
        return;
    }
    let pool = pool(threads - 1);
    // A new epoch ends the workers' spinning after the last chunks (`keep_awake`), which
    // would otherwise hold them until it timed out.
    let epoch = EPOCH.fetch_add(1, Ordering::SeqCst) + 1;
    let count = work.len();
    let entries: Vec<Mutex<Option<Task<'_>>>> =
        work.into_iter().map(|f| Mutex::new(Some(f))).collect();
    let next = AtomicUsize::new(0);
    let take = || {
        while let Some(entry) = entries.get(next.fetch_add(1, Ordering::Relaxed)) {
            let f = entry.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(f) = f {
                f();
            }
        }
    };
    pool.in_place_scope(|s| {
        for _ in 1..count.min(threads) {
            s.spawn(|_| take());
        }
        take();
    });
    keep_awake(&pool, threads - 1, epoch);
}

/// A split kernel as one [`CompiledKernel`]: its segments in order on the calling thread, each
/// range as one chunk, which is the serial kernel's order exactly. What [`crate::run::Compiled`]
/// holds as its kernel when the kernel was split, so that no unsplit twin is compiled.
pub struct OneThread(pub std::rc::Rc<Parallel>);

impl CompiledKernel for OneThread {
    fn run(&self, bufs: &mut [Buffer]) -> Result<()> {
        let empty = || Buffer::I64(vec![].into());
        let mut owned: Vec<Buffer> = bufs
            .iter_mut()
            .map(|b| std::mem::replace(b, empty()))
            .collect();
        let r = self.0.run(&mut owned, 1, u64::MAX, Atomics::Never);
        for (b, o) in bufs.iter_mut().zip(owned) {
            *b = o;
        }
        r
    }

    fn tier(&self) -> &'static str {
        self.0.tier()
    }

    fn settle(&self) {
        self.0.settle()
    }
}

/// Calls of parallel ranges so far: a spinning worker stops when it changes.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// How long the pool's workers stay awake after a chunked call, for the next one.
///
/// Waking a sleeping worker costs 50-100 µs on the (virtual) development machine, half of an
/// in-cache SpMV's parallel time: `tessera bench` of bcsstk16's SpMV on 2 threads took 0.10 ms
/// at best but 0.18-0.23 ms as a median, its worker asleep between calls. OpenMP runtimes
/// spin for the same reason (`KMP_BLOCKTIME`, 200 ms by default); this spins far less, so
/// a core is not kept busy for long after the last call.
const SPIN: std::time::Duration = std::time::Duration::from_micros(500);

/// Keep the pool's `workers` busy-waiting for up to [`SPIN`], until another chunked call
/// starts (`EPOCH` moves on from `epoch`): that call's chunks then start at once instead of
/// after a wake-up. A worker returns to the pool's normal sleep when the time is up.
fn keep_awake(pool: &rayon::ThreadPool, workers: usize, epoch: u64) {
    for _ in 0..workers {
        pool.spawn(move || spin_until(|| EPOCH.load(Ordering::Relaxed) != epoch));
    }
}

/// Busy-wait until `ready` or for [`SPIN`] at most.
fn spin_until(ready: impl Fn() -> bool) {
    let until = std::time::Instant::now() + SPIN;
    while !ready() && std::time::Instant::now() < until {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

/// A pool of `threads` threads, made once per count.
fn pool(threads: usize) -> Arc<rayon::ThreadPool> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    pools
        .entry(threads)
        .or_insert_with(|| {
            Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap_or_else(|_| {
                        rayon::ThreadPoolBuilder::new()
                            .num_threads(1)
                            .build()
                            .expect("a one-thread pool")
                    }),
            )
        })
        .clone()
}

/// Chunks per thread of a range whose chunks copy nothing: a thread that finishes its chunk
/// early takes another, so uneven chunks (work the weights do not see, a thread sharing its
/// core) even out. Each chunk costs a kernel call and copies of the environments, a few µs.
pub const CHUNKS_PER_THREAD: usize = 4;

/// How many chunks to cut a range run on `threads` threads into: [`CHUNKS_PER_THREAD`] per
/// thread, or one per thread when each chunk copies `private` elements (private outputs and
/// workspaces: more chunks would mean more copies to fill and fold).
pub fn chunk_count(threads: usize, private: u64) -> usize {
    match private {
        0 => threads * CHUNKS_PER_THREAD,
        _ => threads,
    }
}

/// How many threads the range `lo..=hi` is worth: 1 when its work (indices, or the entries
/// `weights` gives when it is a usable position array, plus the iterations of the fibers
/// `nested` walks under those entries) is below `min_work`, or when the private copies
/// (`private` elements per chunk, each filled and folded) would cost more than the threads
/// save (a copy's element costs about as much as an index of the range; each extra chunk
/// adds one copy while saving its share of the range, so copies of more than
/// `work / (2 * threads)` elements make splitting a loss). Otherwise `threads`. A `min_work`
/// of 0 splits every range of at least two indices, private copies or not, as
/// `Runner::set_min_parallel_work(0)` promises: the tests of chunking on small inputs,
/// whose outputs are as long as their ranges, would otherwise run as one chunk unnoticed.
///
/// Counting only the weighed level's entries underestimates a body that walks a second
/// fiber per entry: Gustavson's row `i` of C = A B does `sum nnz(B[k, :])` multiply-adds
/// over `A[i, :]`'s entries `k`, about 6 per entry of A on delaunay_n14, so a product whose
/// workspace copies outweighed A's 98,000 entries stayed on one thread while it did 619,000
/// multiply-adds. The nested count is only looked at when the entries alone do not decide
/// for threads, and then estimated from at most [`NESTED_SAMPLE`] entries.
pub fn useful_threads(
    lo: i64,
    hi: i64,
    threads: usize,
    weights: Option<Weights<'_>>,
    nested: Option<Nested<'_>>,
    private: u64,
    min_work: u64,
) -> usize {
    if threads <= 1 || lo > hi {
        return 1;
    }
    let len = (hi - lo + 1) as u64;
    let span = weights
        .filter(|w| lo >= 0 && (hi as usize) < w.len().saturating_sub(1))
        .map(|w| (w.at(lo as usize), w.at(hi as usize + 1)));
    let entries = span.map(|(a, b)| (b - a).max(0) as u64);
    // A range of empty rows still costs an index each.
    let work = entries.map_or(len, |e| e.max(len));
    match (
        threads_for_work(work, threads, private, min_work),
        span,
        nested,
    ) {
        (1, Some((a, b)), Some(n)) => {
            let inner = n.estimate(a, b);
            threads_for_work(work.saturating_add(inner), threads, private, min_work)
        }
        (t, _, _) => t,
    }
}

/// The most entries [`Nested::estimate`] reads: a systematic sample of that many (a gather of
/// two positions each, a few microseconds), against a range whose work is at least a few
/// hundred thousand iterations when the answer matters.
pub const NESTED_SAMPLE: u64 = 4096;

/// The fiber a range's body walks under each entry of its weighed level (`ir::Nested`):
/// entry `p` has coordinate `crd[p]`, whose fiber is `ptr[crd[p]]..ptr[crd[p] + 1]`.
#[derive(Clone, Copy)]
pub struct Nested<'a> {
    pub crd: Weights<'a>,
    pub ptr: Weights<'a>,
}

impl Nested<'_> {
    /// The iterations of the fibers under entries `a..b`: their exact sum when there are at
    /// most [`NESTED_SAMPLE`] entries, else the sum over every `step`-th entry scaled by
    /// `step` (the entries are not random, but the answer only decides a thread count). A
    /// coordinate outside `ptr` or a decreasing fiber counts 0: the kernel reports corrupt
    /// input itself, this is only an estimate.
    pub fn estimate(&self, a: i64, b: i64) -> u64 {
        let (a, b) = (a.max(0) as usize, (b.max(0) as usize).min(self.crd.len()));
        if a >= b {
            return 0;
        }
        let n = (b - a) as u64;
        let step = n.div_ceil(NESTED_SAMPLE) as usize;
        let fibers = self.ptr.len().saturating_sub(1);
        let mut sum = 0u64;
        let mut seen = 0u64;
        for p in (a..b).step_by(step) {
            let k = self.crd.at(p);
            if k >= 0 && (k as usize) < fibers {
                let k = k as usize;
                sum += (self.ptr.at(k + 1) - self.ptr.at(k)).max(0) as u64;
            }
            seen += 1;
        }
        // Scale the sample to every entry (exact when `step` is 1).
        ((sum as u128 * n as u128) / seen as u128).min(u64::MAX as u128) as u64
    }
}

/// The cost rule of [`useful_threads`] for a known amount of `work`: 1 below `min_work` (0
/// splits anything) or when `private` elements copied per chunk would cost more than the
/// threads save, else `threads`. A driver that knows a step's work better than a range's
/// weights can (Bellman-Ford's push round walks the out-edges of the previous round's
/// improved vertices only, while its range's weights count every vertex's) asks it directly.
pub fn threads_for_work(work: u64, threads: usize, private: u64, min_work: u64) -> usize {
    if threads <= 1 {
        return 1;
    }
    if min_work == 0 {
        return threads;
    }
    if work < min_work || private.saturating_mul(2 * threads as u64) > work {
        1
    } else {
        threads
    }
}

/// A range's weights: the position array of the `Dense(SparseList)` level its loop drives,
/// of either index width (`coord=i32` levels, such as a SciPy CSR shared from Python, hold
/// 4-byte positions; reading only 8-byte ones left those ranges counted by rows, so an SpMV
/// with fewer rows than the threshold but many entries stayed on one thread).
#[derive(Clone, Copy)]
pub enum Weights<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

impl<'a> Weights<'a> {
    /// The position array `b` as weights, if it is an integer array of a level's width.
    pub fn of(b: &'a Buffer) -> Option<Weights<'a>> {
        match b {
            Buffer::I64(v) => Some(Weights::I64(v)),
            Buffer::I32(v) => Some(Weights::I32(v)),
            _ => None,
        }
    }

    fn len(&self) -> usize {
        match self {
            Weights::I64(v) => v.len(),
            Weights::I32(v) => v.len(),
        }
    }

    fn at(&self, i: usize) -> i64 {
        match self {
            Weights::I64(v) => v[i],
            Weights::I32(v) => i64::from(v[i]),
        }
    }

    /// The first `i` in `lo..hi` with `self[i] >= target` (`hi` if none), by bisection (the
    /// answer for monotone weights; some index of the range for others).
    fn first_at_or_after(&self, lo: usize, hi: usize, target: i64) -> usize {
        match self {
            Weights::I64(v) => lo + v[lo..hi].partition_point(|&p| p < target),
            Weights::I32(v) => lo + v[lo..hi].partition_point(|&p| i64::from(p) < target),
        }
    }
}

/// Cut `lo..=hi` into at most `threads` chunks: with weights (a position array, row `i`'s
/// entries at `w[i]..w[i + 1]`) at about equal numbers of entries (a binary search per cut),
/// else at equal numbers of indices. Chunks are non-empty, in order, and cover the range.
pub fn cut(lo: i64, hi: i64, threads: usize, weights: Option<Weights<'_>>) -> Vec<(i64, i64)> {
    let len = (hi - lo + 1) as u64;
    let k = (threads as u64).min(len).max(1) as i64;
    let mut starts: Vec<i64> = (0..k)
        .map(|c| lo + ((len as u128 * c as u128) / k as u128) as i64)
        .collect();
    if let Some(w) = weights
        && lo >= 0
        && (hi as usize) < w.len().saturating_sub(1)
        && w.at(lo as usize) <= w.at(hi as usize + 1)
    {
        let (w0, w1) = (w.at(lo as usize), w.at(hi as usize + 1));
        for (c, s) in starts.iter_mut().enumerate().skip(1) {
            let target = w0 + ((w1 - w0) as i128 * c as i128 / k as i128) as i64;
            // The first row whose entries start at or after the target.
            *s = w.first_at_or_after(lo as usize, hi as usize + 1, target) as i64;
        }
    }
    // Keep the cuts increasing (weights that are not monotone cannot break the partition).
    let mut out = vec![];
    let mut start = lo;
    for (c, &s) in starts.iter().enumerate().skip(1) {
        let s = s.clamp(start + 1, hi + 1);
        if s > start && s <= hi {
            out.push((start, s - 1));
            start = s;
        }
        let _ = c;
    }
    out.push((start, hi));
    out
}

/// The value a private copy of `buf` starts from: the fold's identity in the buffer's type
/// (a narrow integer `min` starts from that type's largest value, not i64's).
fn identity(elem: ElemType, p: &Private) -> Scalar {
    let Fold::Op(op) = p.fold else {
        return p.identity;
    };
    match (op, elem) {
        (BinOp::Min, ElemType::I8) => Scalar::I8(i8::MAX),
        (BinOp::Min, ElemType::I32) => Scalar::I32(i32::MAX),
        (BinOp::Min, ElemType::U8) => Scalar::U8(u8::MAX),
        (BinOp::Min, ElemType::U64) => Scalar::U64(u64::MAX),
        (BinOp::Max, ElemType::I8) => Scalar::I8(i8::MIN),
        (BinOp::Max, ElemType::I32) => Scalar::I32(i32::MIN),
        (BinOp::Max, ElemType::U8) => Scalar::U8(0),
        (BinOp::Max, ElemType::U64) => Scalar::U64(0),
        (BinOp::And, ElemType::U8) => Scalar::U8(u8::MAX),
        (BinOp::And, ElemType::U64) => Scalar::U64(u64::MAX),
        _ => p.identity,
    }
}

/// `acc[k] = acc[k] fold part[k]` for every element, in the arithmetic the kernels use
/// (wrapping integers, the strong zero of `*`, NaN-propagating `min`/`max`).
fn fold(acc: &mut Buffer, part: &Buffer, op: BinOp) {
    use crate::semantics::{max_f, min_f, mul_f};
    macro_rules! ints {
        ($a:expr, $b:expr) => {
            for (x, &y) in $a.iter_mut().zip($b) {
                *x = match op {
                    BinOp::Add => x.wrapping_add(y),
                    BinOp::Mul => x.wrapping_mul(y),
                    BinOp::Min => (*x).min(y),
                    BinOp::Max => (*x).max(y),
                    BinOp::And => *x & y,
                    BinOp::Or => *x | y,
                    _ => *x,
                }
            }
        };
    }
    macro_rules! floats {
        ($a:expr, $b:expr, $t:ty) => {
            for (x, &y) in $a.iter_mut().zip($b) {
                let (p, q) = (*x as f64, y as f64);
                *x = match op {
                    BinOp::Add => p + q,
                    BinOp::Mul => mul_f(p, q),
                    BinOp::Min => min_f(p, q),
                    BinOp::Max => max_f(p, q),
                    _ => p,
                } as $t
            }
        };
    }
    match (acc, part) {
        (Buffer::F64(a), Buffer::F64(b)) => floats!(a, b, f64),
        (Buffer::F32(a), Buffer::F32(b)) => floats!(a, b, f32),
        (Buffer::I64(a), Buffer::I64(b)) => ints!(a, b),
        (Buffer::I32(a), Buffer::I32(b)) => ints!(a, b),
        (Buffer::I8(a), Buffer::I8(b)) => ints!(a, b),
        (Buffer::U8(a), Buffer::U8(b)) => ints!(a, b),
        (Buffer::U64(a), Buffer::U64(b)) => ints!(a, b),
        (Buffer::Bool(a), Buffer::Bool(b)) => {
            for (x, &y) in a.iter_mut().zip(b) {
                *x = match op {
                    BinOp::Add | BinOp::Or | BinOp::Max => *x | y,
                    BinOp::Mul | BinOp::And | BinOp::Min => *x & y,
                    _ => *x,
                }
            }
        }
        _ => {}
    }
}

/// `acc[k] = part[k]` where `acc[k] == z`, the `<<choose(z)>>=` fold ([`Fold::Choose`]):
/// a copy holds `z` where its chunk wrote nothing, and else what the serial loop would have
/// left in an element still holding `z`. The lowering privatises only a `z` that the
/// element type holds exactly and that is not a float zero (`-0.0 == 0.0` would let an
/// unwritten copy's `z` replace the other zero), so this comparison in the element's compute
/// type is the kernels' one.
fn fold_choose(acc: &mut Buffer, part: &Buffer, z: Scalar) {
    macro_rules! choose {
        ($a:expr, $b:expr, $x:ident => $key:expr, $z:expr) => {
            for ($x, &y) in $a.iter_mut().zip($b) {
                if $key == $z {
                    *$x = y;
                }
            }
        };
    }
    let (zi, zf, zb) = (z.as_i64(), z.as_f64(), z.as_bool());
    match (acc, part) {
        (Buffer::F64(a), Buffer::F64(b)) => choose!(a, b, x => *x, zf),
        (Buffer::F32(a), Buffer::F32(b)) => choose!(a, b, x => f64::from(*x), zf),
        (Buffer::I64(a), Buffer::I64(b)) => choose!(a, b, x => *x, zi),
        (Buffer::I32(a), Buffer::I32(b)) => choose!(a, b, x => i64::from(*x), zi),
        (Buffer::I8(a), Buffer::I8(b)) => choose!(a, b, x => i64::from(*x), zi),
        (Buffer::U8(a), Buffer::U8(b)) => choose!(a, b, x => i64::from(*x), zi),
        (Buffer::U64(a), Buffer::U64(b)) => choose!(a, b, x => *x as i64, zi),
        (Buffer::Bool(a), Buffer::Bool(b)) => choose!(a, b, x => *x, zb),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_partition_the_range() {
        for (lo, hi, t) in [(0, 0, 4), (0, 9, 3), (5, 6, 8), (0, 99, 2), (-3, 3, 4)] {
            let c = cut(lo, hi, t, None);
            assert_eq!(c.first().unwrap().0, lo);
            assert_eq!(c.last().unwrap().1, hi);
            assert!(
                c.windows(2)
                    .all(|w| w[0].1 + 1 == w[1].0 && w[0].0 <= w[0].1)
            );
            assert!(c.len() <= t);
        }
    }

    #[test]
    fn little_work_runs_on_one_thread() {
        // Indices when there are no weights.
        assert_eq!(useful_threads(0, 99, 2, None, None, 0, 1000), 1);
        assert_eq!(useful_threads(0, 999, 2, None, None, 0, 1000), 2);
        // Entries when there are: 10 rows of 1000 entries each.
        let w: Vec<i64> = (0..=10).map(|r| r * 1000).collect();
        assert_eq!(
            useful_threads(0, 9, 2, Some(Weights::I64(&w)), None, 0, 5000),
            2
        );
        assert_eq!(
            useful_threads(0, 3, 2, Some(Weights::I64(&w)), None, 0, 5000),
            1
        );
        // The same as 4-byte positions (a `coord=i32` level).
        let w32: Vec<i32> = w.iter().map(|&p| p as i32).collect();
        assert_eq!(
            useful_threads(0, 9, 2, Some(Weights::I32(&w32)), None, 0, 5000),
            2
        );
        assert_eq!(
            useful_threads(0, 3, 2, Some(Weights::I32(&w32)), None, 0, 5000),
            1
        );
        // Weights that do not cover the range count indices.
        assert_eq!(
            useful_threads(0, 20, 2, Some(Weights::I64(&w)), None, 0, 5000),
            1
        );
        // Private copies larger than what splitting saves.
        assert_eq!(useful_threads(0, 9999, 2, None, None, 5000, 100), 1);
        assert_eq!(useful_threads(0, 9999, 2, None, None, 1000, 100), 2);
        // No threshold: every range splits, whatever its copies cost.
        assert_eq!(useful_threads(0, 9, 2, None, None, 5000, 0), 2);
        // One thread, or an empty range.
        assert_eq!(useful_threads(0, 1 << 40, 1, None, None, 0, 0), 1);
        assert_eq!(useful_threads(5, 4, 2, None, None, 0, 0), 1);
    }

    #[test]
    fn nested_fibers_count_as_work() {
        // 1000 rows of 5 entries each (a mesh's short rows), every entry selecting a fiber of
        // 6 iterations: 5,000 entries, 30,000 nested iterations.
        let pos: Vec<i64> = (0..=1000).map(|r| r * 5).collect();
        let crd: Vec<i64> = (0..5000).map(|p| (p * 7) % 1000).collect();
        let inner: Vec<i64> = (0..=1000).map(|r| r * 6).collect();
        let w = Some(Weights::I64(&pos));
        let nested = Nested {
            crd: Weights::I64(&crd),
            ptr: Weights::I64(&inner),
        };
        assert_eq!(nested.estimate(0, 5000), 30_000);
        // Copies of 2,000 elements a chunk outweigh the 5,000 entries on 2 threads
        // (2,000 * 4 > 5,000) but not the 35,000 iterations with the nested fibers.
        assert_eq!(useful_threads(0, 999, 2, w, None, 2_000, 1_000), 1);
        assert_eq!(useful_threads(0, 999, 2, w, Some(nested), 2_000, 1_000), 2);
        // The same at 4-byte widths.
        let (pos32, crd32, inner32): (Vec<i32>, Vec<i32>, Vec<i32>) = (
            pos.iter().map(|&p| p as i32).collect(),
            crd.iter().map(|&p| p as i32).collect(),
            inner.iter().map(|&p| p as i32).collect(),
        );
        let n32 = Nested {
            crd: Weights::I32(&crd32),
            ptr: Weights::I32(&inner32),
        };
        let w32 = Some(Weights::I32(&pos32));
        assert_eq!(useful_threads(0, 999, 2, w32, Some(n32), 2_000, 1_000), 2);
        // Copies beyond even that, or work below the threshold, stay on one thread.
        assert_eq!(useful_threads(0, 999, 2, w, Some(nested), 9_000, 1_000), 1);
        assert_eq!(useful_threads(0, 999, 2, w, Some(nested), 0, 50_000), 1);
        // Only the range's own entries count: rows 0..=99 have 500 entries, 3,000 nested.
        assert_eq!(nested.estimate(0, 500), 3_000);
        assert_eq!(useful_threads(0, 99, 2, w, Some(nested), 2_000, 1_000), 1);
        // Empty fibers add nothing.
        let flat = vec![0i64; 1001];
        let none = Nested {
            crd: Weights::I64(&crd),
            ptr: Weights::I64(&flat),
        };
        assert_eq!(none.estimate(0, 5000), 0);
        assert_eq!(useful_threads(0, 999, 2, w, Some(none), 2_000, 1_000), 1);
        // Coordinates outside the fibers and decreasing positions count 0, never panic.
        let bad_crd: Vec<i64> = vec![-1, 5000, i64::MAX, 3, 1000];
        let bad_ptr: Vec<i64> = vec![0, 4, 2, 9, 9];
        let bad = Nested {
            crd: Weights::I64(&bad_crd),
            ptr: Weights::I64(&bad_ptr),
        };
        // Only coordinate 3 is inside: 9 - 9 = 0; coordinate 1 would give 2 - 4 < 0.
        assert_eq!(bad.estimate(0, 5), 0);
        assert_eq!(bad.estimate(-3, 99), 0);
        assert_eq!(bad.estimate(4, 2), 0);
        let dec = Nested {
            crd: Weights::I64(&[1, 0, 2]),
            ptr: Weights::I64(&bad_ptr),
        };
        assert_eq!(dec.estimate(0, 3), 4 + 7);
        // One thread, or a range the weights do not cover, ignores the nested fibers.
        assert_eq!(useful_threads(0, 999, 1, w, Some(nested), 0, 1), 1);
        assert_eq!(useful_threads(0, 1500, 2, w, Some(nested), 2_000, 1_000), 1);
    }

    #[test]
    fn nested_estimate_samples_long_ranges() {
        // 100,000 entries: a systematic sample of at most NESTED_SAMPLE of them. Fibers of
        // 1..=8 iterations cycling with the coordinate: the sample sees the same mix.
        let n = 100_000i64;
        let crd: Vec<i64> = (0..n).map(|p| (p * 7919) % 5000).collect();
        let mut inner = vec![0i64];
        for k in 0..5000 {
            inner.push(inner[k as usize] + 1 + (k % 8));
        }
        let nested = Nested {
            crd: Weights::I64(&crd),
            ptr: Weights::I64(&inner),
        };
        let exact: u64 = crd
            .iter()
            .map(|&k| (inner[k as usize + 1] - inner[k as usize]) as u64)
            .sum();
        let est = nested.estimate(0, n);
        assert!(
            est.abs_diff(exact) * 20 < exact,
            "estimate {est} against {exact}"
        );
        // At most NESTED_SAMPLE entries exactly.
        let small = NESTED_SAMPLE as i64;
        let exact: u64 = crd[..small as usize]
            .iter()
            .map(|&k| (inner[k as usize + 1] - inner[k as usize]) as u64)
            .sum();
        assert_eq!(nested.estimate(0, small), exact);
    }

    #[test]
    fn fragments_concatenate_in_chunk_order() {
        use crate::ir::{BufId, Rows, VarId, build as b};
        // One appended output: array 1 (i64 coordinates), cursor at env slot 0, last fiber
        // at env slot 1; env_i64 is buffer 2.
        let range = Chunked {
            lo: VarId(2),
            hi: VarId(3),
            start: b::int(0),
            stop: b::int(9),
            body: vec![],
            private: vec![],
            scratch: vec![],
            scratch_state: vec![],
            rows: vec![Rows {
                cursor: VarId(0),
                last: Some(VarId(1)),
                arrays: vec![BufId(1)],
            }],
            weights: None,
            nested: None,
            atomics: None,
        };
        let env = |cursor: i64, last: i64| {
            vec![
                Buffer::I64(vec![cursor, last].into()),
                Buffer::new(ElemType::F64),
                Buffer::new(ElemType::Bool),
            ]
        };
        // The first chunk appended 2 entries into the array itself (grown past them), the
        // second none (empty rows), the third 3 into its fragment.
        let mut chunks = vec![
            Fragments {
                env: env(2, 1),
                parts: vec![Buffer::I64(vec![4, 7, 0, 0].into())],
            },
            Fragments {
                env: env(0, -1),
                parts: vec![Buffer::new(ElemType::I64)],
            },
            Fragments {
                env: env(3, 8),
                parts: vec![Buffer::I64(vec![1, 2, 5, 0].into())],
            },
        ];
        let mut bufs = vec![
            Buffer::new(ElemType::I64),
            Buffer::new(ElemType::I64),
            Buffer::I64(vec![0, -1].into()),
        ];
        stitch(&range, &[(0, Some(1))], &mut chunks, &mut bufs, 2, 1);
        assert_eq!(&bufs[1].as_i64().unwrap()[..5], &[4, 7, 1, 2, 5]);
        // The cursor is the total, the last fiber the greatest any chunk wrote.
        assert_eq!(bufs[2].as_i64().unwrap(), &[5, 8]);
    }

    #[test]
    fn spans_of_a_join_cover_every_fragment_once() {
        // Fragments of odd lengths (an empty one among them), cut into 1-5 spans that cross
        // the fragments' boundaries: the same array whatever the cut, threads or not.
        let lens = [3usize, 0, 7, 1, 250_001];
        let srcs: Vec<Buffer> = lens
            .iter()
            .enumerate()
            .map(|(c, &n)| {
                // Grown past the length, as a kernel leaves a fragment; the tail must not
                // be copied.
                let v: Vec<i64> = (0..n + 5).map(|k| (c * 1_000_000 + k) as i64).collect();
                Buffer::I64(v.into())
            })
            .collect();
        let want: Vec<i64> = std::iter::once(-1)
            .chain(
                lens.iter()
                    .enumerate()
                    .flat_map(|(c, &n)| (0..n).map(move |k| (c * 1_000_000 + k) as i64)),
            )
            .collect();
        for spans in 1..=5 {
            for threads in [1, 2, 3] {
                let total: usize = lens.iter().sum();
                let mut dst = Buffer::I64(vec![-1; 1 + total].into());
                let refs: Vec<&Buffer> = srcs.iter().collect();
                let mut work: Vec<Vec<SpanCopy<'_>>> = (0..spans).map(|_| vec![]).collect();
                split_copies(&mut dst, 1, &refs, &lens, &mut work);
                run_spans(work, threads);
                assert_eq!(dst.as_i64().unwrap(), &want[..], "{spans} spans");
            }
        }
    }

    #[test]
    fn a_large_join_on_threads_equals_the_serial_one() {
        use crate::ir::{BufId, Rows, VarId, build as b};
        // Two arrays of one output (i64 coordinates, f64 values) over 3 chunks, large enough
        // (over `PARALLEL_JOIN_BYTES`) for the copies to be cut between threads.
        let range = Chunked {
            lo: VarId(2),
            hi: VarId(3),
            start: b::int(0),
            stop: b::int(9),
            body: vec![],
            private: vec![],
            scratch: vec![],
            scratch_state: vec![],
            rows: vec![Rows {
                cursor: VarId(0),
                last: Some(VarId(1)),
                arrays: vec![BufId(0), BufId(1)],
            }],
            weights: None,
            nested: None,
            atomics: None,
        };
        let lens = [100_003usize, 0, 170_001];
        let chunks = || -> Vec<Fragments> {
            lens.iter()
                .enumerate()
                .map(|(c, &n)| Fragments {
                    env: vec![
                        Buffer::I64(vec![n as i64, c as i64].into()),
                        Buffer::new(ElemType::F64),
                        Buffer::new(ElemType::Bool),
                    ],
                    parts: vec![
                        Buffer::I64(
                            (0..n + 3)
                                .map(|k| (k * 7 + c) as i64)
                                .collect::<Vec<_>>()
                                .into(),
                        ),
                        Buffer::F64(
                            (0..n + 3)
                                .map(|k| k as f64 + c as f64 / 4.0)
                                .collect::<Vec<_>>()
                                .into(),
                        ),
                    ],
                })
                .collect()
        };
        let joined = |threads: usize| {
            let mut bufs = vec![
                Buffer::new(ElemType::I64),
                Buffer::new(ElemType::F64),
                Buffer::I64(vec![0, -1].into()),
            ];
            stitch(
                &range,
                &[(0, Some(1))],
                &mut chunks(),
                &mut bufs,
                2,
                threads,
            );
            bufs
        };
        let one = joined(1);
        let total: usize = lens.iter().sum();
        assert_eq!(one[2].as_i64().unwrap(), &[total as i64, 2]);
        let i = one[0].as_i64().unwrap();
        assert_eq!(i[100_002], 100_002 * 7);
        assert_eq!(i[100_003], 2);
        assert_eq!(i[total - 1], 170_000 * 7 + 2);
        for threads in [2, 3] {
            assert_eq!(joined(threads), one, "{threads} threads");
        }
    }

    #[test]
    fn choose_copies_fill_only_elements_still_holding_the_identity() {
        // Chunk 1 chose 7 for element 0 and 9 for element 1 (already 5 before the loop);
        // chunk 2 chose 8 for elements 0 and 2.
        let mut acc = Buffer::I64(vec![-1, 5, -1, -1].into());
        fold_choose(
            &mut acc,
            &Buffer::I64(vec![7, 9, -1, -1].into()),
            Scalar::I64(-1),
        );
        fold_choose(
            &mut acc,
            &Buffer::I64(vec![8, -1, 8, -1].into()),
            Scalar::I64(-1),
        );
        assert_eq!(acc, Buffer::I64(vec![7, 5, 8, -1].into()));
        // Narrow and float element types compare in their compute type.
        let mut acc = Buffer::U8(vec![3, 0].into());
        fold_choose(&mut acc, &Buffer::U8(vec![4, 6].into()), Scalar::I64(3));
        assert_eq!(acc, Buffer::U8(vec![4, 0].into()));
        let mut acc = Buffer::F32(vec![-1.5, 2.0].into());
        fold_choose(
            &mut acc,
            &Buffer::F32(vec![0.25, 1.0].into()),
            Scalar::F64(-1.5),
        );
        assert_eq!(acc, Buffer::F32(vec![0.25, 2.0].into()));
    }

    #[test]
    fn weighted_cuts_balance_entries() {
        // Row 0 holds 90 entries, rows 1..=9 one each.
        let mut w = vec![0, 90];
        for k in 1..=9 {
            w.push(90 + k);
        }
        let c = cut(0, 9, 2, Some(Weights::I64(&w)));
        assert_eq!(c, vec![(0, 0), (1, 9)]);
        let w32: Vec<i32> = w.iter().map(|&p| p as i32).collect();
        assert_eq!(cut(0, 9, 2, Some(Weights::I32(&w32))), c);
        // Non-monotone weights still give a partition.
        let c = cut(0, 3, 2, Some(Weights::I64(&[5, 0, 9, 1, 2])));
        assert_eq!(c.first().unwrap().0, 0);
        assert_eq!(c.last().unwrap().1, 3);
    }
}

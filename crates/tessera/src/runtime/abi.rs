//! The boundary between native kernels and Rust: the buffer table a kernel reads its arrays
//! from, and the helper functions it calls.
//!
//! A kernel is `extern "C" fn(views: *mut View, state: *mut GrowState, fault: *mut i64) -> i64`.
//! It keeps each buffer's pointer and length in registers and reloads them from `views` after
//! calling [`tessera_grow`], the only helper that moves memory.

use super::Buffer;

/// One buffer as a kernel sees it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct View {
    pub ptr: *mut u8,
    pub len: i64,
}

/// Byte offsets of the fields of [`View`] (the generated code addresses them directly).
pub const VIEW_SIZE: i32 = std::mem::size_of::<View>() as i32;
pub const VIEW_PTR: i32 = std::mem::offset_of!(View, ptr) as i32;
pub const VIEW_LEN: i32 = std::mem::offset_of!(View, len) as i32;

/// What [`tessera_grow`] needs: the buffers themselves and the table the kernel reads.
pub struct GrowState<'a> {
    /// The buffers by number. A chunk of a parallel loop (`run_native_chunk`) shares most of
    /// them with the other chunks, so they are reached through pointers, not one slice.
    bufs: Vec<*mut Buffer>,
    /// Whether the kernel may move (grow, sort) each buffer: only its own ones in a chunk.
    movable: Vec<bool>,
    /// The table the kernel also reads; only ever accessed through this raw pointer while the
    /// kernel runs, so the kernel's copy of it stays valid.
    views: *mut View,
    _bufs: std::marker::PhantomData<&'a mut [Buffer]>,
}

impl GrowState<'_> {
    /// Buffer `k` for moving, if the kernel may move it.
    ///
    /// # Safety
    /// No other reference to the buffer may be live (guaranteed for movable buffers: they
    /// belong to this run alone).
    unsafe fn movable(&mut self, k: usize) -> Option<&mut Buffer> {
        if !*self.movable.get(k)? {
            return None;
        }
        // SAFETY: the pointer is valid for the whole run (its owner outlives it) and, being
        // movable, the buffer is reached by this run only; the caller holds no other reference.
        Some(unsafe { &mut *self.bufs[k] })
    }

    /// Refresh the kernel's view of movable buffer `k` after a helper wrote it: writing a
    /// shared buffer copies it (`Store`), so its memory may have moved.
    fn refresh(&mut self, k: usize) {
        // SAFETY: the helper calling this holds no other reference to the buffer.
        if let Some(b) = unsafe { self.movable(k) } {
            let view = view_of(b);
            // SAFETY: `views` has one entry per buffer (built by `run_native`) and `k` is in
            // range, since `movable` found the buffer.
            unsafe { *self.views.add(k) = view };
        }
    }

    /// Buffer `k` for reading.
    fn get(&self, k: usize) -> Option<&Buffer> {
        // SAFETY: valid for the run; shared buffers are only ever read while chunks run.
        self.bufs.get(k).map(|&p| unsafe { &*p })
    }
}

/// A buffer's view. Shared memory is not copied: the kernel writes only owned buffers
/// (`backend::check_buffers` makes them so), and the helpers that write a buffer copy it and
/// refresh its view.
pub(crate) fn view_of(b: &mut Buffer) -> View {
    View {
        ptr: b.view_ptr(),
        len: b.len() as i64,
    }
}

/// Grow buffer `buf` to at least `want` elements (new ones zero) and refresh its view.
/// Returns 0, or 1 if the size cannot be allocated.
///
/// # Safety
/// `state` must point to the live `GrowState` the running kernel was given, and `buf` must be
/// one of its buffer numbers (the generated code passes a constant from the checked IR).
pub unsafe extern "C" fn tessera_grow(state: *mut GrowState<'_>, buf: i64, want: i64) -> i64 {
    // SAFETY: the caller passes the state it received from `run_native`, which outlives the call
    // and is not otherwise borrowed while the kernel runs.
    let state = unsafe { &mut *state };
    let k = buf as usize;
    // SAFETY: no other reference to the buffer is live during the helper call.
    let Some(b) = (unsafe { state.movable(k) }) else {
        return 1;
    };
    if want > b.len() as i64 {
        if want > super::buffer::MAX_GROW {
            return 1;
        }
        if !super::buffer::grow(b, want as usize) {
            return 1;
        }
    }
    state.refresh(k);
    0
}

/// `Stmt::Sort` of `buf[lo..hi]` (the kernel has checked the range). Returns 0, or 1 if the
/// buffer or range is not valid after all.
///
/// # Safety
/// As for [`tessera_grow`]: `state` is the running kernel's live `GrowState`.
pub unsafe extern "C" fn tessera_sort(
    state: *mut GrowState<'_>,
    buf: i64,
    lo: i64,
    hi: i64,
) -> i64 {
    // SAFETY: the caller passes the state it received from `run_native`; sorting in place moves
    // no memory, so the kernel's views stay valid.
    let state = unsafe { &mut *state };
    // SAFETY: no other reference to the buffer is live during the helper call.
    let Some(v) = (unsafe { state.movable(buf as usize) }).and_then(|b| b.as_i64_mut()) else {
        return 1;
    };
    if lo >= hi {
        return 0;
    }
    if lo < 0 || hi as usize > v.len() {
        return 1;
    }
    super::intrinsics::sort_i64(&mut v[lo as usize..hi as usize]);
    state.refresh(buf as usize);
    0
}

/// `Stmt::Sort` of the slots `buf[lo..hi]` with their flags in buffer `flags` (the kernel has
/// checked the range). Returns 0; or, with the fault's index in `*bad`, `flags + 1` for a
/// slot outside the flags, `buf + 1` if a buffer is not valid after all (the kernel returns
/// the out-of-bounds fault of that buffer).
///
/// # Safety
/// As for [`tessera_grow`]; `bad` must be valid for a write of one i64 (the kernel's fault word).
pub unsafe extern "C" fn tessera_sort_slots(
    state: *mut GrowState<'_>,
    buf: i64,
    flags: i64,
    lo: i64,
    hi: i64,
    bad: *mut i64,
) -> i64 {
    // SAFETY: as in `tessera_sort`.
    let state = unsafe { &mut *state };
    let (b, f) = (buf as usize, flags as usize);
    let fail = |code: i64, at: i64| {
        // SAFETY: the caller passes its fault word.
        unsafe { *bad = at };
        code
    };
    if b == f || b >= state.bufs.len() || f >= state.bufs.len() {
        return fail(buf + 1, lo);
    }
    // The flags are only read, and they are a buffer other than `buf`: a shared reference to
    // them may live beside the mutable one to the slots.
    let fp: *const Buffer = state.bufs[f];
    // SAFETY: the pointer is valid for the run and the buffer is distinct from `buf`, the
    // only one borrowed mutably below.
    let Buffer::Bool(fl) = (unsafe { &*fp }) else {
        return fail(buf + 1, lo);
    };
    // SAFETY: no other reference to the slots buffer is live during the helper call.
    let Some(v) = (unsafe { state.movable(b) }).and_then(|x| x.as_i64_mut()) else {
        return fail(buf + 1, lo);
    };
    if lo >= hi {
        return 0;
    }
    if lo < 0 || hi as usize > v.len() {
        return fail(buf + 1, lo);
    }
    if let Err(q) = super::intrinsics::sort_slots(&mut v[lo as usize..hi as usize], fl) {
        return fail(flags + 1, q);
    }
    state.refresh(b);
    0
}

/// `Stmt::SortPerm` of `perm[lo..hi]` by `keys` (the kernel has checked the range). Returns 0,
/// or 1 with the offending position of `keys` in `*bad`.
///
/// # Safety
/// As for [`tessera_grow`]; `bad` must be valid for a write of one i64 (the kernel's fault word).
pub unsafe extern "C" fn tessera_sort_perm(
    state: *mut GrowState<'_>,
    keys: i64,
    perm: i64,
    lo: i64,
    hi: i64,
    bad: *mut i64,
) -> i64 {
    // SAFETY: as in `tessera_sort`.
    let state = unsafe { &mut *state };
    let (k, p) = (keys as usize, perm as usize);
    if k == p || k >= state.bufs.len() || p >= state.bufs.len() {
        return 1;
    }
    // SAFETY: no other reference to the permutation is live during the helper call.
    let Some(pb) = (unsafe { state.movable(p) }) else {
        return 1;
    };
    // Take the permutation out so both buffers can be borrowed; put it back unchanged in
    // address (a `Vec` moved out and back keeps its heap allocation), so the views stay valid.
    let mut pb = std::mem::replace(pb, Buffer::I64(vec![].into()));
    let keys = state.get(k).and_then(|b| b.as_i64());
    let r = match (keys, pb.as_i64_mut()) {
        (Some(kv), Some(pv)) if lo >= hi => {
            let _ = (kv, pv);
            Ok(())
        }
        (Some(kv), Some(pv)) if lo >= 0 && hi as usize <= pv.len() => {
            super::intrinsics::sort_perm(kv, &mut pv[lo as usize..hi as usize])
        }
        _ => Err(-1),
    };
    // SAFETY: as above; `keys` is no longer used.
    if let Some(slot) = unsafe { state.movable(p) } {
        *slot = pb;
    }
    state.refresh(p);
    match r {
        Ok(()) => 0,
        Err(index) => {
            // SAFETY: the kernel passes its fault word, valid for the whole call.
            unsafe { *bad = index };
            1
        }
    }
}

/// `Expr::HashFind` in buffer `buf` (see `intrinsics::hash_find`); -1 for a bad buffer.
///
/// # Safety
/// As for [`tessera_grow`].
pub unsafe extern "C" fn tessera_hash_find(state: *mut GrowState<'_>, buf: i64, key: i64) -> i64 {
    // SAFETY: the caller passes the state it received from `run_native`; nothing is moved.
    let state = unsafe { &*state };
    match state.get(buf as usize).and_then(|b| b.as_i64()) {
        Some(t) => super::intrinsics::hash_find(t, key),
        None => -1,
    }
}

pub extern "C" fn tessera_exp(x: f64) -> f64 {
    x.exp()
}
pub extern "C" fn tessera_log(x: f64) -> f64 {
    x.ln()
}
pub extern "C" fn tessera_fmod(x: f64, y: f64) -> f64 {
    x % y
}

/// The signature of a compiled kernel.
pub type KernelFn = unsafe extern "C" fn(*mut View, *mut GrowState<'_>, *mut i64) -> i64;

/// Run a native kernel on buffers. Returns the kernel's status code and the fault detail word.
///
/// # Safety
/// `f` must be a kernel generated for buffers of exactly these element types (checked by the
/// caller), so every access it makes is bounds-checked against the views passed here.
pub unsafe fn run_native(f: KernelFn, bufs: &mut [Buffer]) -> (i64, i64) {
    let mut table: Vec<View> = bufs.iter_mut().map(view_of).collect();
    let views = table.as_mut_ptr();
    let mut state = GrowState {
        movable: vec![true; bufs.len()],
        bufs: bufs.iter_mut().map(|b| b as *mut Buffer).collect(),
        views,
        _bufs: std::marker::PhantomData,
    };
    let mut fault = 0i64;
    // SAFETY: the table and the state live until the call returns and are reached only through
    // these pointers meanwhile; the kernel touches buffer memory only through the views
    // (bounds-checked), and `tessera_grow` refreshes the view of any buffer it reallocates.
    let code = unsafe { f(views, &mut state, &mut fault) };
    drop(table);
    (code, fault)
}

/// The buffers of a parallel loop's chunk: the shared ones (by pointer, with the views taken
/// of them before the chunks started) and the chunk's own.
pub struct ChunkBuffers {
    /// Per buffer number: the shared buffer's pointer and view.
    pub shared: Vec<(*mut Buffer, View)>,
}

// SAFETY: the shared buffers are only read, or written at elements no other chunk writes
// (the race check and `ir::split` guarantee it), while chunks run; their owner keeps them
// alive and untouched until every chunk has returned.
unsafe impl Send for ChunkBuffers {}
// SAFETY: as for `Send`: chunks only read the table itself.
unsafe impl Sync for ChunkBuffers {}

/// Run a native kernel as one chunk of a parallel loop: buffer `k` is `own[k]` where given
/// (the chunk's private buffers, which it may grow), else the shared buffer, which the kernel
/// may load from and store to but not move. Returns the status code and fault word.
///
/// # Safety
/// As for [`run_native`]; besides, the kernel must touch the shared buffers only at elements
/// no concurrent chunk writes, and never grow, fill or sort them (`ir::split` checks this).
pub unsafe fn run_native_chunk(
    f: KernelFn,
    shared: &ChunkBuffers,
    own: &mut [Option<&mut Buffer>],
) -> (i64, i64) {
    let mut table: Vec<View> = shared.shared.iter().map(|s| s.1).collect();
    let mut bufs: Vec<*mut Buffer> = shared.shared.iter().map(|s| s.0).collect();
    let mut movable = vec![false; bufs.len()];
    for (k, o) in own.iter_mut().enumerate() {
        if let Some(b) = o {
            table[k] = view_of(b);
            bufs[k] = &mut **b as *mut Buffer;
            movable[k] = true;
        }
    }
    let views = table.as_mut_ptr();
    let mut state = GrowState {
        bufs,
        movable,
        views,
        _bufs: std::marker::PhantomData,
    };
    let mut fault = 0i64;
    // SAFETY: the table and state live until the call returns; own buffers are this chunk's
    // alone, and the caller guarantees the shared ones are used as described above.
    let code = unsafe { f(views, &mut state, &mut fault) };
    drop(table);
    (code, fault)
}

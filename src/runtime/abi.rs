//! The boundary between native kernels and Rust: the buffer table a kernel reads its arrays
//! from, and the helper functions it calls.
//!
//! A kernel is `extern "C" fn(views: *mut View, state: *mut GrowState, fault: *mut i64) -> i64`.
//! It keeps each buffer's pointer and length in registers and reloads them from `views` after
//! calling [`tessera_grow`], the only helper that moves memory.

use super::Buffer;
use crate::types::Scalar;

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
    bufs: &'a mut [Buffer],
    /// The table the kernel also reads; only ever accessed through this raw pointer while the
    /// kernel runs, so the kernel's copy of it stays valid.
    views: *mut View,
}

fn view_of(b: &mut Buffer) -> View {
    View {
        ptr: b.as_mut_ptr(),
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
    let Some(b) = state.bufs.get_mut(k) else {
        return 1;
    };
    if want > b.len() as i64 {
        if want > crate::backend::MAX_GROW {
            return 1;
        }
        let n = crate::backend::grown_len(b.len(), want as usize);
        b.resize(n, Scalar::zero(b.elem()));
    }
    // SAFETY: `views` has one entry per buffer (built by `run_native`) and `k` is in range.
    unsafe { *state.views.add(k) = view_of(b) };
    0
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
    let mut state = GrowState { bufs, views };
    let mut fault = 0i64;
    // SAFETY: the table and the state live until the call returns and are reached only through
    // these pointers meanwhile; the kernel touches buffer memory only through the views
    // (bounds-checked), and `tessera_grow` refreshes the view of any buffer it reallocates.
    let code = unsafe { f(views, &mut state, &mut fault) };
    drop(table);
    (code, fault)
}

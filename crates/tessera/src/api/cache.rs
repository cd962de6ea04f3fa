//! The kernel cache the elementwise, reduction and matmul functions share when no `Runner` is
//! given: repeated calls of the same operation on inputs of the same formats compile once per
//! thread. The runner is tiered: operations repeated on large data move to C (`backend::Tiered`).

use crate::run::Runner;

thread_local! {
    static RUNNER: Runner = Runner::tiered();
}

pub fn with_runner<T>(f: impl FnOnce(&Runner) -> T) -> T {
    RUNNER.with(f)
}

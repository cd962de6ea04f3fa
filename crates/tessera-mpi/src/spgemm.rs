//! Distributed C = A B (filled in below).
use crate::args::Args;
use crate::comm::DistResult;
use mpi::topology::SimpleCommunicator;
use tessera::run::Runner;

pub fn command(_world: &SimpleCommunicator, _runner: &Runner, _a: &Args) -> DistResult<String> {
    unimplemented!()
}

//! The collective steps every command shares: agreeing on failure (so that no rank waits in a
//! collective for a rank that has given up), and variable-length exchanges.

use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::fmt;

/// An error agreed on by every rank: the first failing rank's message, known everywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub rank: i32,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}: {}", self.rank, self.message)
    }
}

pub type DistResult<T> = std::result::Result<T, Failure>;

/// Every rank passes its own outcome of a local step; all get `Ok` only if every rank
/// succeeded, else all get the error of the lowest failing rank (broadcast from it). Call it
/// after each fallible local step and before the next collective, so that a rank that failed
/// never leaves the others waiting.
pub fn agree<T, E: fmt::Display>(
    world: &SimpleCommunicator,
    outcome: std::result::Result<T, E>,
) -> DistResult<T> {
    let (me, size) = (world.rank(), world.size());
    let mine = if outcome.is_err() { me } else { size };
    let mut first = size;
    world.all_reduce_into(&mine, &mut first, SystemOperation::min());
    let mut message = match &outcome {
        Err(e) if first == me => e.to_string().into_bytes(),
        _ => vec![],
    };
    match outcome {
        Ok(v) if first == size => return Ok(v),
        _ => {}
    }
    let root = world.process_at_rank(first);
    let mut len = message.len() as u64;
    root.broadcast_into(&mut len);
    message.resize(len as usize, 0);
    root.broadcast_into(&mut message[..]);
    Err(Failure {
        rank: first,
        message: String::from_utf8_lossy(&message).into_owned(),
    })
}

fn counts_displs(counts: &[usize]) -> (Vec<i32>, Vec<i32>) {
    let c: Vec<i32> = counts.iter().map(|&n| n as i32).collect();
    let mut d = Vec::with_capacity(c.len());
    let mut at = 0i32;
    for &n in &c {
        d.push(at);
        at += n;
    }
    (c, d)
}

/// Personalised all-to-all: `send[r]` goes to rank `r`; returns what each rank sent here, by
/// source rank (MPI_Alltoall of the counts, then MPI_Alltoallv).
pub fn exchange<T: Equivalence + Copy + Default>(
    world: &SimpleCommunicator,
    send: &[Vec<T>],
) -> Vec<Vec<T>> {
    let size = world.size() as usize;
    let send_counts: Vec<i32> = send.iter().map(|v| v.len() as i32).collect();
    let mut recv_counts = vec![0i32; size];
    world.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
    let flat: Vec<T> = send.iter().flatten().copied().collect();
    let (sc, sd) = counts_displs(&send.iter().map(Vec::len).collect::<Vec<_>>());
    let rc_usize: Vec<usize> = recv_counts.iter().map(|&n| n as usize).collect();
    let (rc, rd) = counts_displs(&rc_usize);
    let mut recv = vec![T::default(); rc_usize.iter().sum()];
    {
        let s = Partition::new(&flat[..], &sc[..], &sd[..]);
        let mut r = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
        world.all_to_all_varcount_into(&s, &mut r);
    }
    let mut out = Vec::with_capacity(size);
    let mut at = 0;
    for n in rc_usize {
        out.push(recv[at..at + n].to_vec());
        at += n;
    }
    out
}

/// Every rank's `local` slice, concatenated in rank order, on every rank (MPI_Allgatherv).
pub fn all_gather<T: Equivalence + Copy + Default>(
    world: &SimpleCommunicator,
    local: &[T],
) -> Vec<T> {
    let size = world.size() as usize;
    let mine = local.len() as u64;
    let mut lens = vec![0u64; size];
    world.all_gather_into(&mine, &mut lens[..]);
    let (c, d) = counts_displs(&lens.iter().map(|&n| n as usize).collect::<Vec<_>>());
    let mut out = vec![T::default(); lens.iter().sum::<u64>() as usize];
    {
        let mut r = PartitionMut::new(&mut out[..], &c[..], &d[..]);
        world.all_gather_varcount_into(local, &mut r);
    }
    out
}

/// Every rank's `local` slice, concatenated in rank order, on rank 0 (empty elsewhere).
pub fn gather_to_root<T: Equivalence + Copy + Default>(
    world: &SimpleCommunicator,
    local: &[T],
) -> Vec<T> {
    let root = world.process_at_rank(0);
    let mine = local.len() as u64;
    if world.rank() != 0 {
        root.gather_into(&mine);
        root.gather_varcount_into(local);
        return vec![];
    }
    let mut lens = vec![0u64; world.size() as usize];
    root.gather_into_root(&mine, &mut lens[..]);
    let (c, d) = counts_displs(&lens.iter().map(|&n| n as usize).collect::<Vec<_>>());
    let mut out = vec![T::default(); lens.iter().sum::<u64>() as usize];
    {
        let mut r = PartitionMut::new(&mut out[..], &c[..], &d[..]);
        root.gather_varcount_into_root(local, &mut r);
    }
    out
}

/// The sum over ranks (MPI_Allreduce).
pub fn sum_u64(world: &SimpleCommunicator, v: u64) -> u64 {
    let mut out = 0u64;
    world.all_reduce_into(&v, &mut out, SystemOperation::sum());
    out
}

use mpi::traits::*;
fn main() {
    let u = mpi::initialize().unwrap();
    let w = u.world();
    println!("{} of {}", w.rank(), w.size());
}

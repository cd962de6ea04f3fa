mod common;
use std::time::Instant;
use tessera::algorithms::points::{PointIndex, Query, QueryKind};
fn main() -> tessera::error::Result<()> {
    let args = common::Args::from_env();
    let n: usize = args.num(0, 1_000_000usize)?;
    let reps: usize = args.num(1, 100000usize)?;
    let mut rng = common::Uniform(42);
    let pts: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.next() * 1e4, rng.next() * 1e4))
        .collect();
    let mut index = PointIndex::new(&pts)?;
    let runner = args.runner()?;
    let k = index.compile(&runner, QueryKind::Radius)?;
    let qs: Vec<Query> = (0..64)
        .map(|_| Query::Radius {
            cx: rng.next() * 1e4,
            cy: rng.next() * 1e4,
            r: 5.0,
        })
        .collect();
    let same = std::env::var_os("SAME").is_some();
    let t = Instant::now();
    let mut hits = 0;
    for i in 0..reps {
        let q = if same { &qs[0] } else { &qs[i % 64] };
        hits += index.run(&runner, &k, q)?.len();
    }
    println!(
        "per query {:.2} us, hits {hits}",
        t.elapsed().as_secs_f64() * 1e6 / reps as f64
    );
    Ok(())
}

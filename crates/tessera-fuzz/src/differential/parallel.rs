//! Random programs with their top-level loops marked parallel (issue 17): on two threads the
//! JIT agrees with the evaluator (which runs them serially), or the race check refuses the
//! program. Float sums folded from per-thread copies agree within `compare`'s rounding.

#[cfg(test)]
mod tests {
    use super::super::compare::{Verdict, compare};
    use super::super::{MAX_KERNEL_LINES, Shapes, describe, generate, run_compiled, run_eval};
    use arbitrary::Unstructured;
    use tessera::backend::CBackend;
    use tessera::notation::ast::StmtKind;
    use tessera::run::Runner;

    /// Bytes for the generator from a seed (xorshift).
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn parallel_outer_loops_agree_with_the_evaluator() {
        let (mut compared, mut refused, mut split) = (0, 0, 0);
        for seed in 0..300 {
            let data = bytes(seed, 600);
            let mut case = generate::case(&mut Unstructured::new(&data), &Shapes::AGREED);
            let mut marked = false;
            for s in &mut case.program.body {
                if let StmtKind::Loop { parallel, .. } = &mut s.kind {
                    *parallel = tessera::notation::ast::LoopMode::Parallel(Default::default());
                    marked = true;
                }
            }
            if !marked {
                continue;
            }
            let formats = tessera::api::formats_of(&case.tensors);
            let lowered = Runner::lower(&case.program, &formats);
            if let Err(tessera::Error::Race { .. }) = lowered {
                refused += 1;
                continue;
            }
            let lines = lowered.map_or(0, |(k, _, _)| CBackend::source(&k).lines().count());
            if lines > MAX_KERNEL_LINES {
                continue;
            }
            let expected = run_eval(&case.program, &case.tensors);
            let runner = Runner::jit();
            runner.set_threads(2);
            // The cases are small: split them anyway, so the chunks are what is compared.
            runner.set_min_parallel_work(0);
            let mut tensors = case.tensors.clone();
            if let Ok(c) = runner.compile(&case.program, &formats) {
                split += usize::from(c.parallel.is_some());
            }
            let got = run_compiled(&runner, &case.program, &mut tensors);
            match compare(&expected, got.map(|()| &tensors)) {
                Ok(Verdict::Agree) => compared += 1,
                Ok(_) => {}
                Err(why) => panic!(
                    "parallel jit and the evaluator disagree: {why}\n{}",
                    describe(&case)
                ),
            }
        }
        eprintln!("{compared} compared, {split} split into chunks, {refused} refused as races");
        assert!(
            compared >= 20 && split >= 10 && refused >= 1,
            "{compared} {split} {refused}"
        );
    }
}

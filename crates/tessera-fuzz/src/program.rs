//! The program parser and printer: any text either fails to parse with an error, or parses to
//! an AST that prints as text parsing back to the same AST (the printer's promise), and the
//! normalisation passes the compiler runs next take it without panicking.

use std::collections::HashSet;
use tessera::notation::ast::Program;
use tessera::notation::parse::{parse_expr, parse_program};
use tessera::notation::visit;

/// Parse `data` as a program and as a single expression; check both print back.
pub fn program(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = parse_program(text) {
        round_trip(text, &p);
        normalize(&p);
    }
    if let Ok(e) = parse_expr(text) {
        let printed = e.to_string();
        match parse_expr(&printed) {
            Ok(again) if again == e => {}
            Ok(again) => panic!(
                "the printed expression parses to another tree\n--- input\n{text}\n--- printed\n{printed}\n--- reparsed\n{again}"
            ),
            Err(err) => panic!(
                "the printed expression does not parse: {err}\n--- input\n{text}\n--- printed\n{printed}"
            ),
        }
    }
}

fn round_trip(text: &str, p: &Program) {
    let printed = p.to_string();
    match parse_program(&printed) {
        Ok(again) if again == *p => {
            let twice = again.to_string();
            assert!(
                twice == printed,
                "printing is not stable\n--- input\n{text}\n--- printed\n{printed}\n--- printed again\n{twice}"
            );
        }
        Ok(again) => panic!(
            "the printed program parses to another tree\n--- input\n{text}\n--- printed\n{printed}\n--- reparsed\n{again}"
        ),
        Err(err) => panic!(
            "the printed program does not parse: {err}\n--- input\n{text}\n--- printed\n{printed}"
        ),
    }
}

/// The passes before lowering, with every accessed tensor given: errors are fine, panics
/// are findings.
fn normalize(p: &Program) {
    let mut tensors = HashSet::new();
    visit::accesses(&p.body, &mut |a| {
        tensors.insert(a.tensor.clone());
    });
    let _ = tessera::run::normalize(p, &tensors);
}

//! Type checking of loop IR (catches lowering bugs before they reach a backend).

//! Running the `tessera` binary from tests, in a scratch folder of their own.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A scratch folder, removed when dropped.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tessera-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    /// Write `text` to the file `name` and give its path.
    pub fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    }
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("run tessera")
}

/// The command's standard output; fails the test with its standard error if it failed.
pub fn ok(args: &[&str]) -> String {
    let o = tessera(args);
    assert!(
        o.status.success(),
        "tessera {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

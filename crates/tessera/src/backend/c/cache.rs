//! The on-disk cache of compiled kernels: `<dir>/<hash>.so` (and its source `<hash>.c`, kept
//! for debugging), where the hash covers the source text, the full compiler command and the
//! host processor, so a different compiler, flags or machine never reuse an object. Files appear by atomic rename from
//! per-process temporary names, so processes compiling the same kernel at once never see a
//! partial file.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// `$TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera`, else `~/.cache/tessera`, else a
/// folder in the system temporary directory.
pub fn default_dir() -> PathBuf {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    if let Some(d) = var("TESSERA_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("tessera");
    }
    if let Some(h) = var("HOME") {
        return PathBuf::from(h).join(".cache").join("tessera");
    }
    std::env::temp_dir().join("tessera-cache")
}

/// What `-march=native` means on this machine: the processor model and feature flags (from
/// `/proc/cpuinfo` where there is one). Part of the hash, so a cache directory shared between
/// machines (a network home) never hands one machine code built for another processor.
fn host_cpu() -> &'static str {
    static CPU: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CPU.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let first = |key: &str| {
            info.lines()
                .find(|l| l.starts_with(key))
                .unwrap_or_default()
                .to_string()
        };
        format!(
            "{} {} {}",
            std::env::consts::ARCH,
            first("model name"),
            first("flags")
        )
    })
}

/// Where the object for this source and command lives.
pub fn object_path(dir: &Path, source: &str, command: &[String]) -> PathBuf {
    let mut h = Sha256::new();
    // Lengths first, so no two (source, command) pairs hash the same text.
    let parts = [source, host_cpu()];
    for part in parts.into_iter().chain(command.iter().map(String::as_str)) {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let hex: String = h
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    dir.join(format!("{hex}.so"))
}

/// A name no other process or thread uses at the same time, next to `path`.
fn temp_name(path: &Path, ext: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("kernel");
    path.with_file_name(format!("{stem}.tmp{}-{n}.{ext}", std::process::id()))
}

/// Compile `source` with `command` into `path` (a `.so` in the cache directory).
///
/// `detached`: the compiler runs under `sh`, which also renames its output into place, so a
/// compile started in the background finishes filling the cache even if this process exits
/// first (the tiered backend's optimised tier, for the next process); without `sh` it runs as
/// in the foreground.
pub fn compile(
    command: &[String],
    source: &str,
    path: &Path,
    kernel: &str,
    detached: bool,
) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        path: dir.display().to_string(),
        msg: format!("cannot create the kernel cache directory: {e}"),
    })?;
    let c_tmp = temp_name(path, "c");
    let so_tmp = temp_name(path, "so");
    let io = |p: &Path| {
        let p = p.display().to_string();
        move |e: std::io::Error| Error::Io {
            path: p,
            msg: e.to_string(),
        }
    };
    std::fs::write(&c_tmp, source).map_err(io(&c_tmp))?;
    let shown = command.join(" ");
    let Some((prog, args)) = command.split_first() else {
        return Err(Error::Backend("no C compiler command given".into()));
    };
    // The shell's arguments: the temporary object, the temporary source, the object's place,
    // then the compiler command.
    const RENAMING: &str = r#"o=$1; c=$2; d=$3; shift 3
"$@" -o "$o" "$c" -lm || exit $?
mv -f "$o" "$d" && mv -f "$c" "${d%.so}.c""#;
    let shell = detached
        .then(|| {
            Command::new("sh")
                .arg("-c")
                .arg(RENAMING)
                .arg("sh")
                .arg(&so_tmp)
                .arg(&c_tmp)
                .arg(path)
                .args(command)
                .output()
                .ok()
        })
        .flatten();
    if let Some(out) = &shell
        && out.status.success()
    {
        return Ok(());
    }
    let out = match shell {
        // The compiler failed under the shell: report it as below.
        Some(out) if out.status.code() != Some(127) => Ok(out),
        _ => Command::new(prog)
            .args(args)
            .arg("-o")
            .arg(&so_tmp)
            .arg(&c_tmp)
            .arg("-lm")
            .output(),
    };
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_file(&c_tmp);
            return Err(Error::Backend(format!(
                "cannot run the C compiler `{shown}`: {e} (set CC to a C compiler, or use the default backend)"
            )));
        }
    };
    if !out.status.success() {
        let _ = std::fs::remove_file(&so_tmp);
        let _ = std::fs::remove_file(&c_tmp);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first: Vec<&str> = stderr.lines().take(20).collect();
        return Err(Error::Backend(format!(
            "`{shown}` failed on kernel `{kernel}` ({}):\n{}",
            out.status,
            first.join("\n")
        )));
    }
    std::fs::rename(&so_tmp, path).map_err(io(path))?;
    // The source only helps debugging; losing a race for its name does not matter.
    let _ = std::fs::rename(&c_tmp, path.with_extension("c"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_covers_source_and_command() {
        let d = Path::new("/x");
        let cmd = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let a = object_path(d, "int x;", &cmd("cc -O3"));
        assert_eq!(a, object_path(d, "int x;", &cmd("cc -O3")));
        assert_ne!(a, object_path(d, "int y;", &cmd("cc -O3")));
        assert_ne!(a, object_path(d, "int x;", &cmd("gcc -O3")));
        assert_ne!(a, object_path(d, "int x;cc", &cmd("-O3")));
        assert_eq!(a.extension().unwrap(), "so");
    }
}

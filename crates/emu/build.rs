//! Builds the lwIP host program (`hosts/lwip/lwip_host.c`) against
//! Debian's liblwip when its headers are installed; the emulator embeds
//! the program and runs it for `stack = "lwip"` hosts.
//!
//! Without the headers the build still succeeds: the program is left
//! empty and the reason is kept in `RTOLAB_LWIP_BUILD`, which the
//! emulator prints when a scenario asks for an lwIP host. The system C
//! compiler is called directly: one file, one library, no configuration
//! worth a build-system dependency.

use std::path::PathBuf;
use std::process::Command;

/// Where Debian's liblwip-dev puts its headers (its pkg-config `Cflags`).
const LWIP_INCLUDE: &str = "/usr/include/lwip";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let source = manifest.join("../../hosts/lwip/lwip_host.c");
    let binary = out.join("rtolab-lwip-host");
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed={LWIP_INCLUDE}/lwip/tcp.h");
    println!("cargo:rerun-if-env-changed=CC");
    let status = build(&source, &binary);
    if let Err(reason) = &status {
        // An empty program: the emulator refuses lwIP hosts with `reason`.
        std::fs::write(&binary, b"").expect("OUT_DIR is writable");
        println!("cargo:warning=lwIP hosts disabled: {reason}");
    }
    println!(
        "cargo:rustc-env=RTOLAB_LWIP_BUILD={}",
        status.err().unwrap_or_else(|| "ok".to_string())
    );
}

fn build(source: &std::path::Path, binary: &std::path::Path) -> Result<(), String> {
    let header = PathBuf::from(LWIP_INCLUDE).join("lwip/tcp.h");
    if !header.exists() {
        return Err(format!(
            "{} not found: install Debian's liblwip-dev (apt-get install liblwip-dev) and rebuild",
            header.display()
        ));
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&cc)
        .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-std=gnu11"])
        .arg(format!("-I{LWIP_INCLUDE}"))
        .arg(source)
        .arg("-o")
        .arg(binary)
        .arg("-llwip")
        .output()
        .map_err(|e| format!("running {cc}: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(format!("compiling {} failed: {first}", source.display()));
    }
    Ok(())
}

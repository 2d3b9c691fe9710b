//! Runs every scenario file given (with its traces) into a scratch
//! directory and prints one line per output file: scenario, file, length
//! and FNV-1a 64 digest. Two builds that print the same lines wrote
//! byte-identical pcaps, traces and metrics:
//! `cargo run --release --example output_digests -- scenarios/*.toml`.

use std::path::Path;

/// FNV-1a, 64 bits: stable across toolchains, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn main() {
    let scratch = std::env::temp_dir().join(format!("rtolab-digests-{}", std::process::id()));
    let mut paths: Vec<String> = std::env::args().skip(1).collect();
    paths.sort();
    for path in paths {
        let name = Path::new(&path)
            .file_name()
            .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        let scenario = match rtolab_sim::Scenario::from_path(Path::new(&path)) {
            Ok(s) => s,
            Err(e) => {
                println!("{name}: not run: {e}");
                continue;
            }
        };
        let dir = scratch.join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        let opts = rtolab_sim::RunOptions {
            out_dir: Some(dir.clone()),
            write_traces: true,
            ..Default::default()
        };
        if let Err(e) = rtolab_sim::run_scenario(&scenario, &opts) {
            println!("{name}: run failed: {e}");
        }
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        for file in files {
            let bytes = std::fs::read(&file).unwrap_or_default();
            let file_name = file.file_name().unwrap_or_default().to_string_lossy();
            println!("{name} {file_name} {} {:016x}", bytes.len(), fnv1a(&bytes));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

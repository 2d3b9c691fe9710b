//! The `rtolab-emu` command: JSON output, Ctrl-C, and a crash's leftovers.
//! Needs root and /dev/net/tun; without them each test prints why and
//! passes vacuously.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rtolab_emu::{Clock, WallClock};
use rtolab_time::SimTime;

const EMU: &str = env!("CARGO_BIN_EXE_rtolab-emu");

fn can_emulate(test: &str) -> bool {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipping {test}: needs root for network namespaces");
        return false;
    }
    if std::fs::metadata("/dev/net/tun").is_err() {
        eprintln!("skipping {test}: /dev/net/tun unavailable");
        return false;
    }
    true
}

fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("rtolab-{pid}-");
    rtolab_emu::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Waits (up to 10 s) until process `pid` has `count` namespaces.
fn wait_for_namespaces(pid: u32, count: usize) {
    let clock = WallClock::start();
    while namespaces_of(pid).len() < count {
        assert!(
            clock.now() < SimTime::from_secs(10),
            "namespaces never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn json_summary_has_the_timing_fields() {
    if !can_emulate("json_summary_has_the_timing_fields") {
        return;
    }
    let out_dir = std::env::temp_dir().join(format!("rtolab-emu-cli-{}", std::process::id()));
    let out = Command::new(EMU)
        .args([
            "emulate",
            &scenario("emu-p2p-bulk.toml"),
            "--json",
            "--duration",
            "15",
        ])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in [
        "timing_error_p50_ms",
        "timing_error_p99_ms",
        "timing_error_max_ms",
    ] {
        assert!(report[field].as_f64().is_some(), "{field} missing");
    }
    // How to enter the hosts goes to stderr with --json.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ip netns exec rtolab-"), "{stderr}");
    assert!(out_dir.join("client-wire.pcap").exists());
    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("metrics.json")).unwrap()).unwrap();
    assert_eq!(metrics["name"], "emu-p2p-bulk");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn ctrl_c_ends_the_run_and_removes_the_namespaces() {
    if !can_emulate("ctrl_c_ends_the_run_and_removes_the_namespaces") {
        return;
    }
    let child = Command::new(EMU)
        .args([
            "emulate",
            &scenario("emu-bridge-linux.toml"),
            "--keep-running",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for_namespaces(pid, 2);
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(pid as i32), Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ended_by"], "stopped");
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}

#[test]
fn a_killed_emulators_namespaces_are_swept() {
    if !can_emulate("a_killed_emulators_namespaces_are_swept") {
        return;
    }
    let mut child = Command::new(EMU)
        .args([
            "emulate",
            &scenario("emu-bridge-linux.toml"),
            "--keep-running",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for_namespaces(pid, 2);
    // No chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(namespaces_of(pid).len(), 2);
    let out = Command::new(EMU).arg("sweep").output().unwrap();
    assert!(out.status.success());
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}

#[test]
fn bad_input_gives_one_line_errors() {
    let out = Command::new(EMU)
        .args(["emulate", "/nonexistent/scenario.toml"])
        .output()
        .unwrap();
    // A scenario that cannot be read is the user's input: status 2.
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("rtolab-emu: error: /nonexistent/scenario.toml"),
        "{stderr}"
    );
    let out = Command::new(EMU).args(["emulate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn missing_privileges_or_tun_give_one_clear_line() {
    if !can_emulate("missing_privileges_or_tun_give_one_clear_line") {
        return;
    }
    let bulk = scenario("emu-p2p-bulk.toml");
    // As an unprivileged user.
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            EMU,
            "emulate",
            &bulk,
        ])
        .output();
    match out {
        Ok(out) => {
            assert_eq!(out.status.code(), Some(1));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            assert!(stderr.contains("must run as root"), "{stderr}");
        }
        Err(e) => eprintln!("skipping the unprivileged case: setpriv: {e}"),
    }
    // With /dev/net hidden by an empty mount in a private mount namespace.
    let script = format!("mount -t tmpfs none /dev/net && exec {EMU} emulate {bulk}");
    let out = Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output();
    match out {
        Ok(out) if out.status.code() == Some(1) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains("TUN is unavailable: /dev/net/tun"),
                "{stderr}"
            );
        }
        other => eprintln!("skipping the missing-TUN case: {other:?}"),
    }
}

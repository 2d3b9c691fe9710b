//! Network namespaces: one per Linux host, named
//! `rtolab-<pid>-<run>-<host>` after the emulator process that owns it.
//!
//! Namespaces are made and removed with iproute2 (`ip netns`), so they are
//! the same objects users list and enter with `ip netns exec`. A
//! [`Namespace`] removes itself when dropped, which covers normal exits,
//! errors, Ctrl-C (the driver stops its loop and unwinds) and panics. A
//! crash that skips destructors leaves the mount behind; [`sweep_stale`]
//! removes namespaces whose owning process is gone, and runs before every
//! emulation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::EmuError;

/// Prefix of every namespace the emulator creates.
pub const PREFIX: &str = "rtolab-";

/// Where iproute2 mounts named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Namespaces this process owns at the moment: a sweep leaves them alone,
/// even though their owner (this process) is alive and so are they.
static LIVE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Distinguishes the runs of one process (tests run several).
static RUN: AtomicU64 = AtomicU64::new(0);

/// A fresh run number for this process.
pub fn next_run() -> u64 {
    RUN.fetch_add(1, Ordering::SeqCst)
}

/// Most characters of a host name that its namespace name keeps.
pub const MAX_HOST_PART: usize = 32;

/// What a namespace name keeps of a host name: letters, digits, `_` and
/// `-`, anything else as `_`, cut to [`MAX_HOST_PART`] characters.
pub fn host_part(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_HOST_PART)
        .collect()
}

/// The namespace name of `host` in run `run` of process `pid` (its
/// [`host_part`]).
pub fn namespace_name(pid: u32, run: u64, host: &str) -> String {
    format!("{PREFIX}{pid}-{run}-{}", host_part(host))
}

/// The owning process of an emulator namespace, from its name.
pub fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Runs `ip` with `args`; a failure carries the command and its stderr.
pub fn ip(args: &[&str]) -> Result<(), EmuError> {
    let command = format!("ip {}", args.join(" "));
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| EmuError::Command {
            command: command.clone(),
            message: format!("{e} (is iproute2 installed?)"),
        })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(EmuError::Command {
        command,
        message: stderr.split_whitespace().collect::<Vec<_>>().join(" "),
    })
}

/// Names of the emulator's namespaces that exist now.
pub fn list() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX))
        .collect();
    names.sort();
    names
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes emulator namespaces left by processes that no longer run (and
/// this process's own, from runs that ended without cleaning up). Returns
/// the names removed.
pub fn sweep_stale() -> Vec<String> {
    let me = std::process::id();
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let mut removed = Vec::new();
    for name in list() {
        let stale = match owner_pid(&name) {
            Some(pid) if pid == me => !live.contains(&name),
            Some(pid) => !process_alive(pid),
            // Not a name we make: leave it to whoever made it.
            None => false,
        };
        if stale && ip(&["netns", "delete", &name]).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// A network namespace this process created; deleted on drop.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates the namespace `name` with its loopback up and IPv6 off
    /// (emulated links carry IPv4 only, so the kernel's IPv6 chatter would
    /// only be rejected at the edge).
    pub fn create(name: &str) -> Result<Namespace, EmuError> {
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string());
        if let Err(e) = ip(&["netns", "add", name]) {
            LIVE.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(name);
            return Err(e);
        }
        let ns = Namespace {
            name: name.to_string(),
        };
        // Best effort: a kernel without IPv6 has nothing to turn off.
        let _ = ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        let _ = ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name, as `ip netns` shows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file that refers to it, for `setns`.
    pub fn path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.name)
    }

    /// Runs a command inside it (`ip netns exec`).
    pub fn exec(&self, command: &[&str]) -> Result<(), EmuError> {
        let mut args = vec!["netns", "exec", self.name.as_str()];
        args.extend_from_slice(command);
        ip(&args)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // A failure here leaves a stale namespace, which the next run's
        // sweep removes; there is nobody to report it to.
        let _ = ip(&["netns", "delete", &self.name]);
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_owner_and_stay_plain() {
        let name = namespace_name(4242, 3, "end user/phone");
        assert_eq!(name, "rtolab-4242-3-end_user_phone");
        assert_eq!(owner_pid(&name), Some(4242));
        assert_eq!(owner_pid("rtolab-x-1-a"), None);
        assert_eq!(owner_pid("other-1-1-a"), None);
        let long = namespace_name(1, 0, &"h".repeat(100));
        assert_eq!(long.len(), "rtolab-1-0-".len() + 32);
    }

    /// Host names reach `ip` (one argument of a list, never through a
    /// shell) only as namespace names: plain, and never an option or a path.
    #[test]
    fn hostile_host_names_give_plain_namespace_names() {
        for host in [
            "-n",
            "a;reboot",
            "$(id)",
            "../../etc",
            "a b\tc",
            "\u{1b}[31mred",
            "",
        ] {
            let name = namespace_name(7, 1, host);
            assert!(name.starts_with("rtolab-7-1-"), "{name:?}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{name:?}"
            );
        }
    }
}

//! What the emulation tests share: the lock that runs them one at a time,
//! the shipped scenarios, and finding an app in a report.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rtolab_emu::runtime::{AppReport, EmuReport};

static SERIAL: Mutex<()> = Mutex::new(());

/// The lock serialising emulations, or `None` (with the reason printed)
/// when this machine cannot run them.
pub fn emulation_slot(test: &str) -> Option<MutexGuard<'static, ()>> {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipping {test}: needs root for network namespaces");
        return None;
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        eprintln!("skipping {test}: /dev/net/tun unavailable: {e}");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The path of the shipped scenario `name` (in `scenarios/`).
pub fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

/// The text of the shipped scenario `name`.
pub fn shipped(name: &str) -> String {
    std::fs::read_to_string(scenario_path(name)).unwrap()
}

/// The app `name` of a report.
pub fn app<'a>(report: &'a EmuReport, name: &str) -> &'a AppReport {
    report
        .apps
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no app {name} in {:?}", report.apps))
}

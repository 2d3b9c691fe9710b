//! Why an emulation could not start or finish. Every message is one line.

use std::io;
use std::path::PathBuf;

use rtolab_sim::ScenarioError;

/// An emulation failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmuError {
    /// The scenario is invalid or uses what the emulator does not run.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// Namespaces and TUN devices need root.
    #[error("must run as root: network namespaces and TUN devices need CAP_NET_ADMIN (try sudo)")]
    NotRoot,
    /// `/dev/net/tun` cannot be opened.
    #[error("TUN is unavailable: {path}: {source} (load the tun module, or give the container /dev/net/tun)")]
    TunUnavailable {
        /// The device path.
        path: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: io::Error,
    },
    /// A command the emulator runs (`ip ...`) failed.
    #[error("`{command}` failed: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output, on one line.
        message: String,
    },
    /// A TUN device could not be created or configured.
    #[error("TUN device {device} of host {host}: {message}")]
    Tun {
        /// Host name.
        host: String,
        /// Device name.
        device: String,
        /// What went wrong.
        message: String,
    },
    /// Reading or writing a file (a capture, the metrics) failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// An app of a Linux host could not start.
    #[error("app {app} on host {host}: {source}")]
    App {
        /// App name.
        app: String,
        /// Host name.
        host: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The engine loop failed to wait or to read a device.
    #[error("engine loop: {0}")]
    Loop(String),
}

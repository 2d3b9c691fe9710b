//! TUN devices inside host namespaces: the emulator's edge.
//!
//! A device is created by a short-lived thread that enters the host's
//! namespace first, so the device is born there under its final name and
//! never appears in the emulator's own namespace. The file descriptor
//! stays with the emulator: whatever the host's kernel routes out of the
//! device, the emulator reads; whatever the emulator writes, the kernel
//! receives as if it came in over a wire. The device lives as long as the
//! descriptor, so it disappears when the emulator exits, however it exits.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};

use crate::error::EmuError;

/// Path of the TUN clone device.
pub const TUN_PATH: &str = "/dev/net/tun";

/// Checks what the emulator needs before it touches anything: root, and a
/// TUN clone device it can open.
pub fn check_prerequisites() -> Result<(), EmuError> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err(EmuError::NotRoot);
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(TUN_PATH)
        .map(drop)
        .map_err(|source| EmuError::TunUnavailable {
            path: PathBuf::from(TUN_PATH),
            source,
        })
}

/// An L3 TUN device (raw IPv4 datagrams, no packet-information header) in
/// non-blocking mode.
pub struct TunDevice {
    device: tun::Device,
    name: String,
}

impl TunDevice {
    /// Creates device `name` inside the namespace mounted at `netns`.
    pub fn create_in(netns: &Path, name: &str) -> io::Result<TunDevice> {
        let netns = netns.to_path_buf();
        let device_name = name.to_string();
        let device = std::thread::spawn(move || -> io::Result<tun::Device> {
            // Only this thread moves; the namespace it leaves is untouched.
            let ns = File::open(&netns)?;
            setns(ns.as_fd(), CloneFlags::CLONE_NEWNET)?;
            let mut config = tun::Configuration::default();
            config
                .tun_name(&device_name)
                .layer(tun::Layer::L3)
                // Addresses and routes are set with iproute2, like
                // everything else about the host.
                .platform_config(|p| {
                    p.ensure_root_privileges(false);
                });
            tun::create(&config).map_err(|e| io::Error::other(e.to_string()))
        })
        .join()
        .map_err(|_| io::Error::other("TUN creation thread panicked"))??;
        device.set_nonblock()?;
        Ok(TunDevice {
            device,
            name: name.to_string(),
        })
    }

    /// The device name inside its namespace.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads one datagram; `WouldBlock` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.device.recv(buf)
    }

    /// Writes one datagram to the host's kernel.
    pub fn send(&self, datagram: &[u8]) -> io::Result<usize> {
        self.device.send(datagram)
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // `self.device` owns the descriptor and closes it when dropped.
        crate::sys::borrow_fd(&self.device, self.device.as_raw_fd())
    }
}

//! Real-time emulator: the simulator's link models on the wall clock,
//! between Linux network namespaces, with real Linux TCP or the rtolab
//! engine at each host.
//!
//! One engine, two clocks: the links ([`rtolab_sim::link`]), bridges and
//! TCP engine ([`rtolab_tcp`]) are the same sans-IO state machines the
//! simulator drives in virtual time. Here the time comes from the wall
//! clock ([`clock::WallClock`], the only reader of `Instant` in the
//! workspace) and the datagrams from TUN devices.
//!
//! # Layout
//!
//! * [`config`]: emulation scenarios (the simulator's format, plus which
//!   stack runs each host);
//! * [`engine`]: links, bridges and rtolab hosts behind a sans-IO surface
//!   (datagrams in with their arrival time, datagrams out with their
//!   scheduled delivery time), testable in virtual time;
//! * [`runtime`]: the real-time driver: namespaces, TUN devices, the
//!   `ppoll` loop, app threads, timing measurement, reports;
//! * [`netns`] and [`tun_dev`]: namespaces (with the stale sweep) and TUN
//!   devices;
//! * [`apps`]: the scenario's apps on both kinds of host: the simulator's
//!   own apps on rtolab hosts, socket programs on Linux hosts;
//! * [`lwip`] and [`lwip_options`]: lwIP hosts (the real lwIP in a
//!   program of ours) and the settings the scenario gives them;
//! * [`wire_stats`]: per-host TCP counters read off the wire;
//! * [`cli`]: the command line, shared by `rtolab-emu` and `rtolab emulate`.
//!
//! # Hosts
//!
//! * `linux`: a namespace `rtolab-<pid>-<run>-<host>` with one TUN device
//!   per interface; its kernel TCP carries the scenario's apps (threads
//!   that entered the namespace) and anything a user starts there with
//!   `ip netns exec`.
//! * `rtolab`: the engine's stack inside the emulator process, attached
//!   directly to its link, running the simulator's apps; no namespace.
//! * bridges: the emulator passes frames between the two links itself.
//!
//! `unsafe` code is confined to one private module, `sys`: a borrow of the
//! TUN descriptor (the `tun` crate exposes only a raw fd) for `ppoll`, and
//! the `sched_setscheduler` call that makes the engine thread real-time.

#![warn(missing_docs)]

pub mod apps;
pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod error;
pub mod lwip;
pub mod lwip_options;
pub mod netns;
pub mod runtime;
mod sys;
pub mod tun_dev;
pub mod wire_stats;

pub use clock::{Clock, ManualClock, WallClock};
pub use config::{EmuScenario, HostKind};
pub use engine::{Egress, Engine, TunId};
pub use error::EmuError;
pub use runtime::{emulate, EmuOptions, EmuReport};

//! Deterministic discrete-event network simulator: kernel, nodes, links,
//! captures and scenarios.
//!
//! # Layout
//!
//! * [`queue`]: the future event list, ordered by (time, insertion
//!   sequence) with lazy cancellation;
//! * [`rng`]: one seeded ChaCha stream per component, chosen by name;
//! * [`pool`]: reusable packet buffers behind `Copy` handles;
//! * [`link`]: sans-IO link models that are told the time and answer
//!   with outputs and their next deadline, registered in one place (their
//!   `kind` names: [`link::LINK_KINDS`]);
//! * [`node`]: interfaces, static routes, counters;
//! * [`app`]: the app hooks (start, packet, timer, TCP event) and the
//!   UDP and TCP apps, registered in one place ([`app::APP_KINDS`]);
//! * [`middlebox`]: hooks in a node's forwarding path, registered in one
//!   place ([`middlebox::MIDDLEBOX_KINDS`]), and the one driver of a
//!   node's middleboxes ([`middlebox::MiddleboxChain`]) the simulator and
//!   the emulator share;
//! * [`mac`]: channel access of a shared medium's members, registered in
//!   one place ([`mac::MAC_KINDS`]), and the 802.11 DCF;
//! * [`radio`]: the radio medium of wireless MACs (positions and mobility,
//!   propagation, receptions and collisions, radio states and energy);
//! * [`mesh`]: the low-power 802.15.4 mesh's layers (Contiki's MACs, RPL);
//! * [`config`]: what every kind's scenario table is read with: errors
//!   naming the field, values with units, the topology;
//! * [`catalog`]: every registered kind with the fields of its table,
//!   their types, units, defaults and meanings (`rtolab list links`, …);
//! * [`tcp_layer`]: the seam between apps, the kernel and a host's TCP
//!   stack ([`tcp_layer::HostStack`]), whichever stack it is;
//! * [`tcp_layer`]: every host's stack, the run's flow table, our engine's
//!   implementation of the seam, and the per-connection counters computed
//!   from its traces; [`smol`]: smoltcp's implementation;
//! * [`trace`]: typed trace events and sinks;
//! * [`trace_table`]: trace levels and families, and the sink writing
//!   each family as a Parquet table;
//! * [`sim`]: the [`Simulator`] tying them together, one file per layer
//!   (setup, event loop, middleboxes, IP, transport);
//! * [`scenario`] and [`run`]: TOML scenario files and running them;
//! * [`out_dir`]: files made in an output directory without following a
//!   link that stands there.
//!
//! # Determinism
//!
//! Time is integer nanoseconds, ties break by insertion order, every random
//! draw comes from a stream derived from the run seed and the component's
//! name, and no output depends on hash-map iteration order. The same
//! scenario and seed give byte-identical pcaps, traces and metrics.

#![warn(missing_docs)]

pub mod app;
pub mod capture;
pub mod catalog;
pub mod cidr;
pub mod config;
pub mod direction;
mod event;
pub mod limits;
pub mod link;
mod link_slot;
pub mod mac;
pub mod mesh;
pub mod middlebox;
pub mod node;
pub mod out_dir;
pub mod pool;
pub mod position;
pub mod queue;
pub mod radio;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod smol;
pub mod tcp_layer;
pub mod trace;
pub mod trace_table;
pub mod units;

pub use capture::CaptureDirection;
pub use cidr::{Ipv4Cidr, Ipv6Cidr};
pub use limits::{RunLimits, Stop, StopFlag};
pub use rtolab_time::{SimDuration, SimTime};
pub use run::{run_scenario, RunError, RunOptions, RunReport};
pub use scenario::{Scenario, ScenarioError};
pub use sim::{BuildError, SimError, Simulator};

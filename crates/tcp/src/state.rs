//! A connection's state, as the connection keeps it and its trace
//! records it.

use std::fmt;

use serde::Serialize;

/// Connection states with the RFC 9293 names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum State {
    /// No connection.
    #[serde(rename = "CLOSED")]
    Closed,
    /// Waiting for a SYN.
    #[serde(rename = "LISTEN")]
    Listen,
    /// SYN sent, waiting for SYN-ACK.
    #[serde(rename = "SYN-SENT")]
    SynSent,
    /// SYN received and answered.
    #[serde(rename = "SYN-RECEIVED")]
    SynReceived,
    /// Open.
    #[serde(rename = "ESTABLISHED")]
    Established,
    /// We closed; our FIN is not yet acknowledged.
    #[serde(rename = "FIN-WAIT-1")]
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    #[serde(rename = "FIN-WAIT-2")]
    FinWait2,
    /// The peer closed; we may still send.
    #[serde(rename = "CLOSE-WAIT")]
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    #[serde(rename = "CLOSING")]
    Closing,
    /// The peer closed first, then we did; waiting for the last ACK.
    #[serde(rename = "LAST-ACK")]
    LastAck,
    /// Waiting 2 MSL before forgetting the connection.
    #[serde(rename = "TIME-WAIT")]
    TimeWait,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
        };
        f.write_str(name)
    }
}

impl State {
    pub(crate) fn synchronized(self) -> bool {
        !matches!(self, State::Closed | State::Listen | State::SynSent)
    }
}

//! The MAC's side of the radio: the commands it sends, the state it keeps
//! of the radio, and the automatic acknowledgment the CC2420 performs in
//! hardware (`CC2420_CONF_AUTOACK` 1, platform/sky/contiki-conf.h).
//!
//! The radio itself adds no delay: it answers a [`RadioCommand::Cca`] with
//! what the channel is at that instant and starts a transmission at once.
//! The times the CC2420 takes are therefore counted here, by the MAC.

use std::collections::VecDeque;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::FrameRepr;

/// What a MAC asks of its radio.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RadioCommand {
    /// Listen (receive mode).
    On,
    /// Sleep.
    Off,
    /// Report whether the channel is clear, through `handle_cca`. Sent only
    /// while the radio is on.
    Cca,
    /// Send this PSDU (FCS included) now; `handle_tx_done` when its last bit
    /// left. Afterwards the MAC says again whether the radio is on or off.
    Transmit(Vec<u8>),
}

/// Receive-to-transmit turnaround, 12 symbols of 16 µs (aTurnaroundTime,
/// IEEE 802.15.4-2006 §6.4.1): from a clear channel assessment to the first
/// bit on air, and from the end of a frame to its ACK.
pub const TURNAROUND: SimDuration = SimDuration::from_micros(192);

/// Time a radio just switched on needs before its channel assessment is
/// valid: 8 symbols (the CCA detection time, IEEE 802.15.4-2006 §6.9.9;
/// the CC2420's `RSSI_VALID`, which cc2420.c waits for before
/// `STXONCCA`).
pub const RSSI_VALID: SimDuration = SimDuration::from_micros(128);

/// How long cc2420.c's transmit waits for a transmission to start before
/// reporting that a busy channel prevented it: `LOOP_20_SYMBOLS`, 20 symbols.
pub const TX_NO_START: SimDuration = SimDuration::from_micros(320);

/// Who asked for a channel assessment, so a late answer to a request that
/// was abandoned is not taken for another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CcaTicket(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ack {
    Idle,
    Due(SimTime, u8),
    Sending,
}

/// The radio as the MAC drives it.
#[derive(Debug)]
pub(crate) struct RadioCtl {
    cmds: VecDeque<RadioCommand>,
    /// Whether the MAC wants the radio listening (Contiki's `radio_is_on`).
    want_on: bool,
    /// The state last commanded; `None` after a transmission, so it is said
    /// again.
    commanded: Option<bool>,
    /// A frame is being received (between rx start and its end).
    receiving: bool,
    transmitting: bool,
    ack: Ack,
    ccas: VecDeque<CcaTicket>,
    next_ticket: u64,
    /// ACKs sent.
    pub acks_sent: u64,
}

impl RadioCtl {
    pub fn new() -> Self {
        RadioCtl {
            cmds: VecDeque::new(),
            want_on: false,
            commanded: Some(false),
            receiving: false,
            transmitting: false,
            ack: Ack::Idle,
            ccas: VecDeque::new(),
            next_ticket: 0,
            acks_sent: 0,
        }
    }

    pub fn poll(&mut self) -> Option<RadioCommand> {
        self.cmds.pop_front()
    }

    /// Listen (or stay listening).
    pub fn on(&mut self) {
        self.want_on = true;
        self.sync();
    }

    /// Sleep as soon as nothing keeps the radio on: a reception in progress
    /// (the radio contract) or an ACK to send.
    pub fn off(&mut self) {
        self.want_on = false;
        self.sync();
    }

    pub fn is_on(&self) -> bool {
        self.want_on
    }

    pub fn receiving(&self) -> bool {
        self.receiving
    }

    /// An ACK is due or on air: the radio is taken.
    pub fn ack_busy(&self) -> bool {
        self.ack != Ack::Idle
    }

    fn sync(&mut self) {
        if self.transmitting {
            return;
        }
        let target = self.want_on || self.receiving || self.ack != Ack::Idle;
        if self.commanded != Some(target) {
            self.cmds.push_back(if target {
                RadioCommand::On
            } else {
                RadioCommand::Off
            });
            self.commanded = Some(target);
        }
    }

    /// Asks for a channel assessment; the answer is matched to the ticket.
    pub fn cca(&mut self) -> CcaTicket {
        let ticket = CcaTicket(self.next_ticket);
        self.next_ticket += 1;
        self.ccas.push_back(ticket);
        self.cmds.push_back(RadioCommand::Cca);
        ticket
    }

    /// The request an answer belongs to (they come back in order).
    pub fn cca_answered(&mut self) -> Option<CcaTicket> {
        self.ccas.pop_front()
    }

    pub fn transmit(&mut self, psdu: Vec<u8>) {
        self.cmds.push_back(RadioCommand::Transmit(psdu));
        self.transmitting = true;
        self.commanded = None;
    }

    /// The last bit left; true when it was the radio's own ACK.
    pub fn tx_done(&mut self) -> bool {
        self.transmitting = false;
        let was_ack = self.ack == Ack::Sending;
        if was_ack {
            self.ack = Ack::Idle;
        }
        self.sync();
        was_ack
    }

    pub fn rx_start(&mut self) {
        self.receiving = true;
    }

    pub fn rx_end(&mut self) {
        self.receiving = false;
        self.sync();
    }

    /// A frame to us asking for an ACK has been received at `now`: the
    /// CC2420 answers one turnaround later, whatever the MAC is doing.
    pub fn schedule_ack(&mut self, now: SimTime, seq: u8) {
        if self.ack == Ack::Idle && !self.transmitting {
            self.ack = Ack::Due(now + TURNAROUND, seq);
            self.sync();
        }
    }

    pub fn poll_timeout(&self) -> Option<SimTime> {
        match self.ack {
            Ack::Due(at, _) => Some(at),
            _ => None,
        }
    }

    pub fn handle_timeout(&mut self, now: SimTime) {
        if let Ack::Due(at, seq) = self.ack {
            if at <= now {
                if self.transmitting {
                    self.ack = Ack::Idle;
                    self.sync();
                    return;
                }
                let mut psdu = Vec::with_capacity(5);
                // An ACK always fits: 5 bytes, no addresses.
                if FrameRepr::ack(seq, false).emit(&[], &mut psdu).is_ok() {
                    self.transmit(psdu);
                    self.ack = Ack::Sending;
                    self.acks_sent += 1;
                } else {
                    self.ack = Ack::Idle;
                }
            }
        }
    }
}

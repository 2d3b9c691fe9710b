//! `kind = "gilbert-elliott"`: a full-duplex point-to-point link whose
//! losses come in bursts, as on a fading radio link, rather than one by one.
//!
//! Each direction is a two-state Markov chain over the frames it carries
//! (the Gilbert–Elliott model): in the *good* state a frame is lost with
//! probability `loss_good`, in the *bad* state with `loss_bad`; after each
//! frame the chain moves from good to bad with probability `p_good_to_bad`
//! and back with `p_bad_to_good`. In the long run a fraction
//! `p_good_to_bad / (p_good_to_bad + p_bad_to_good)` of frames meet the bad
//! state, and a bad spell lasts `1 / p_bad_to_good` frames on average.
//! Independent losses (the `point-to-point` link's `loss`) hide what bursts
//! do to TCP: several losses in one window, consecutive timeouts, backoff.
//!
//! The chain advances per frame, not per unit of time (as the classic model
//! and ns-3's burst error model do): a sender that backs off after a
//! timeout meets the rest of a bad spell with its retransmissions, however
//! long it waited. Timing and queueing are the point-to-point link's: this
//! model wraps a loss-free [`P2pLink`] and decides each arriving frame's
//! fate.
//!
//! ```toml
//! [[link]]
//! name = "radio"
//! kind = "gilbert-elliott"
//! ends = [ { host = "a", address = "10.0.0.1/24" },
//!          { host = "b", address = "10.0.0.2/24" } ]
//! rate = "2Mbps"
//! delay = "10ms"
//! p_good_to_bad = 0.01      # per frame
//! p_bad_to_good = 0.25      # bad spells last 4 frames on average
//! loss_good = 0.0           # optional, default 0
//! loss_bad = 1.0            # optional, default 1
//! ```

use rand::Rng;
use rtolab_time::SimTime;
use serde::{Deserialize, Serialize};

use super::p2p::{count_as_lost, WiredSpec};
use super::{
    DirectionStats, Frame, LinkCheck, LinkModel, LinkOut, LinkOutput, P2pConfig, P2pLink, Port,
    RawEnd, ScenarioLink,
};
use crate::config::{required, Attachment, Duration, Rate, ScenarioError};
use crate::pool::PacketId;
use crate::rng::SimRng;
use crate::trace::DropReason;

/// The loss process of one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    /// Probability of moving from the good to the bad state after a frame.
    pub p_good_to_bad: f64,
    /// Probability of moving from the bad to the good state after a frame.
    pub p_bad_to_good: f64,
    /// Loss probability of a frame in the good state.
    pub loss_good: f64,
    /// Loss probability of a frame in the bad state.
    pub loss_bad: f64,
}

/// Counters of a [`GilbertElliottLink`], indexed by sending port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GilbertElliottStats {
    /// What a point-to-point link counts; the chain's losses are
    /// `dropped_random_loss`.
    pub directions: [DirectionStats; 2],
    /// Frames that arrived while their direction's chain was bad.
    pub frames_in_bad_state: [u64; 2],
    /// Bad spells entered.
    pub bad_spells: [u64; 2],
}

/// A point-to-point link with Gilbert–Elliott losses in each direction.
#[derive(Debug)]
pub struct GilbertElliottLink<P> {
    inner: P2pLink<P>,
    process: GilbertElliott,
    bad: [bool; 2],
    rng: SimRng,
    /// Frames and bytes the chain dropped, per sending port.
    dropped: [(u64, u64); 2],
    frames_in_bad_state: [u64; 2],
    bad_spells: [u64; 2],
}

impl<P: Copy> GilbertElliottLink<P> {
    /// A new idle link with both chains in the good state; `rng` draws
    /// losses and state changes.
    pub fn new(link: P2pConfig, process: GilbertElliott, rng: SimRng) -> Self {
        GilbertElliottLink {
            // The wrapped link loses nothing, so it never draws from its
            // copy of the stream.
            inner: P2pLink::new(P2pConfig { loss: 0.0, ..link }, rng.clone()),
            process,
            bad: [false; 2],
            rng,
            dropped: [(0, 0); 2],
            frames_in_bad_state: [0; 2],
            bad_spells: [0; 2],
        }
    }

    /// Decides the fate of each frame the wrapped link delivered into
    /// `out[first..]`: a lost one becomes a drop at the receiver.
    fn apply_losses(&mut self, first: usize, out: &mut [LinkOutput<P>]) {
        for output in &mut out[first..] {
            let LinkOutput::Delivered { port, frame } = *output else {
                continue;
            };
            let from = (1 - port) as usize;
            let bad = self.bad[from];
            let loss = if bad {
                self.frames_in_bad_state[from] += 1;
                self.process.loss_bad
            } else {
                self.process.loss_good
            };
            if loss > 0.0 && self.rng.gen_bool(loss.min(1.0)) {
                self.dropped[from].0 += 1;
                self.dropped[from].1 += u64::from(frame.len);
                *output = LinkOutput::Dropped {
                    port,
                    frame,
                    reason: DropReason::RandomLoss,
                };
            }
            let change = if bad {
                self.process.p_bad_to_good
            } else {
                self.process.p_good_to_bad
            };
            if change > 0.0 && self.rng.gen_bool(change.min(1.0)) {
                self.bad[from] = !bad;
                if !bad {
                    self.bad_spells[from] += 1;
                }
            }
        }
    }
}

impl<P: Copy> LinkModel<P> for GilbertElliottLink<P> {
    type Stats = GilbertElliottStats;

    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        let first = out.len();
        self.inner.transmit(now, from, frame, out);
        self.apply_losses(first, out);
    }

    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        let first = out.len();
        self.inner.handle_timeout(now, out);
        self.apply_losses(first, out);
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        self.inner.poll_timeout()
    }

    fn stats(&self, now: SimTime) -> GilbertElliottStats {
        let mut directions = self.inner.stats(now).directions;
        count_as_lost(&mut directions, self.dropped);
        GilbertElliottStats {
            directions,
            frames_in_bad_state: self.frames_in_bad_state,
            bad_spells: self.bad_spells,
        }
    }

    fn set_start_notices(&mut self, on: bool) {
        self.inner.set_start_notices(on);
    }
}

/// The `[[link]]` fields of a Gilbert–Elliott link.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGilbertElliott {
    /// The two ends, as on a point-to-point link. Required.
    ends: Option<Vec<RawEnd>>,
    /// Bit rate each way, like `"10Mbps"`. Required.
    rate: Option<Rate>,
    /// One-way propagation delay, like `"5ms"`. Required.
    delay: Option<Duration>,
    /// Frames that may wait at each end. Unit: packets. Default: 100.
    queue: Option<usize>,
    /// Probability of moving from the good state to the bad one after each frame, per
    /// direction. Required.
    p_good_to_bad: Option<f64>,
    /// Probability of moving from the bad state back to the good one after each frame.
    /// Required.
    p_bad_to_good: Option<f64>,
    /// Probability that a frame is lost in the good state. Default: 0.
    loss_good: Option<f64>,
    /// Probability that a frame is lost in the bad state. Default: 1.
    loss_bad: Option<f64>,
}

/// A validated Gilbert–Elliott link.
#[derive(Clone, Debug, PartialEq)]
pub struct GilbertElliottSpec {
    /// Ends, rate, delay and queue, as on a point-to-point link (its `loss`
    /// is zero).
    pub wired: WiredSpec,
    /// The loss process of each direction.
    pub process: GilbertElliott,
}

impl ScenarioLink for GilbertElliottSpec {
    const KIND: &'static str = "gilbert-elliott";
    type Raw = RawGilbertElliott;
    type Model = GilbertElliottLink<PacketId>;

    fn validate(raw: RawGilbertElliott, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let wired = WiredSpec::validate_lossless(raw.ends, raw.rate, raw.delay, raw.queue, cx)?;
        let probability = |value: Option<f64>, field: &str| -> Result<f64, ScenarioError> {
            let p = value.unwrap_or(0.0);
            if (0.0..=1.0).contains(&p) {
                Ok(p)
            } else {
                Err(ScenarioError::new(
                    cx.at(field),
                    format!("must be a probability between 0 and 1, got {p}"),
                ))
            }
        };
        let p_good_to_bad = required(&raw.p_good_to_bad, cx.at("p_good_to_bad"), &cx.what)?;
        let p_bad_to_good = required(&raw.p_bad_to_good, cx.at("p_bad_to_good"), &cx.what)?;
        let process = GilbertElliott {
            p_good_to_bad: probability(Some(p_good_to_bad), "p_good_to_bad")?,
            p_bad_to_good: probability(Some(p_bad_to_good), "p_bad_to_good")?,
            loss_good: probability(raw.loss_good, "loss_good")?,
            loss_bad: probability(raw.loss_bad.or(Some(1.0)), "loss_bad")?,
        };
        Ok(GilbertElliottSpec { wired, process })
    }

    fn rate_bps(&self) -> u64 {
        self.wired.rate_bps
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.wired.attachments()
    }

    fn build(&self, rng: SimRng) -> GilbertElliottLink<PacketId> {
        GilbertElliottLink::new(self.wired.lossless(), self.process, rng)
    }
}

#[cfg(test)]
mod tests {
    use rtolab_time::SimDuration;

    use super::*;
    use crate::rng::component_stream;

    fn link(process: GilbertElliott, seed: u64) -> GilbertElliottLink<u32> {
        GilbertElliottLink::new(
            P2pConfig {
                rate_bps: 1_000_000_000,
                delay: SimDuration::from_micros(10),
                queue_capacity: 1_000_000,
                loss: 0.0,
            },
            process,
            component_stream(seed, "link/ge"),
        )
    }

    /// Sends `n` frames from port 0, one every millisecond, and returns
    /// whether each arrived, in order.
    fn send(l: &mut GilbertElliottLink<u32>, n: u32) -> Vec<bool> {
        let mut out = LinkOut::new();
        let mut fates = Vec::new();
        for i in 0..n {
            let now = SimTime::from_millis(u64::from(i));
            let frame = Frame {
                packet: i,
                len: 100,
            };
            l.transmit(now, 0, 1, frame, &mut out);
            l.handle_timeout(now + SimDuration::from_micros(500), &mut out);
            for o in out.drain(..) {
                match o {
                    LinkOutput::Delivered { port: 1, .. } => fates.push(true),
                    LinkOutput::Dropped {
                        port: 1,
                        reason: DropReason::RandomLoss,
                        ..
                    } => fates.push(false),
                    _ => {}
                }
            }
        }
        fates
    }

    #[test]
    fn a_chain_that_never_turns_bad_loses_nothing() {
        let mut l = link(
            GilbertElliott {
                p_good_to_bad: 0.0,
                p_bad_to_good: 1.0,
                loss_good: 0.0,
                loss_bad: 1.0,
            },
            1,
        );
        assert!(send(&mut l, 1000).iter().all(|&ok| ok));
        let stats = l.stats(SimTime::from_secs(2));
        assert_eq!(stats.directions[0].delivered_packets, 1000);
        assert_eq!(stats.bad_spells, [0, 0]);
    }

    #[test]
    fn a_chain_stuck_bad_loses_everything_after_the_first_frame() {
        let mut l = link(
            GilbertElliott {
                p_good_to_bad: 1.0,
                p_bad_to_good: 0.0,
                loss_good: 0.0,
                loss_bad: 1.0,
            },
            1,
        );
        let fates = send(&mut l, 50);
        assert!(fates[0]);
        assert!(fates[1..].iter().all(|&ok| !ok));
        let stats = l.stats(SimTime::from_secs(1));
        assert_eq!(stats.directions[0].delivered_packets, 1);
        assert_eq!(stats.directions[0].dropped_random_loss, 49);
        assert_eq!(stats.directions[0].delivered_bytes, 100);
        assert_eq!(stats.bad_spells[0], 1);
        assert_eq!(stats.frames_in_bad_state[0], 49);
    }

    #[test]
    fn losses_match_the_chain_s_long_run_rate_and_come_in_bursts() {
        let process = GilbertElliott {
            p_good_to_bad: 0.02,
            p_bad_to_good: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut l = link(process, 7);
        let n = 200_000;
        let fates = send(&mut l, n);
        let lost = fates.iter().filter(|&&ok| !ok).count() as f64;
        // Stationary bad fraction 0.02 / 0.27 = 0.074.
        let expected = 0.02 / 0.27;
        assert!(
            (lost / f64::from(n) - expected).abs() < 0.01,
            "loss rate {}",
            lost / f64::from(n)
        );
        // Mean run of consecutive losses: 1 / p_bad_to_good = 4 frames.
        let runs = fates.windows(2).filter(|w| w[0] && !w[1]).count() as f64;
        let mean_run = lost / runs;
        assert!((mean_run - 4.0).abs() < 0.4, "mean burst {mean_run}");
        // Independent losses at the same rate would average 1.08.
    }

    #[test]
    fn the_same_seed_gives_the_same_losses() {
        let process = GilbertElliott {
            p_good_to_bad: 0.1,
            p_bad_to_good: 0.3,
            loss_good: 0.01,
            loss_bad: 0.9,
        };
        assert_eq!(
            send(&mut link(process, 3), 2000),
            send(&mut link(process, 3), 2000)
        );
        assert_ne!(
            send(&mut link(process, 3), 2000),
            send(&mut link(process, 4), 2000)
        );
    }
}

//! The bridge study's RTO for a time-slotted NFC link (bridge spec §3.2 and
//! §3.3): the theoretical round trip of a packet from its own size
//! (equations 5.1-5.6), the optimum initial RTO derived from it, and the
//! per-packet estimator of the study's Algorithm 1.
//!
//! Van Jacobson's estimator sets the RTO of the next packet from the RTT of
//! the previous one. On a slotted link whose round trip grows with the
//! packet's size that is wrong whenever sizes vary, and the first data
//! packet has no sample at all. Algorithm 1 instead estimates each packet's
//! RTO before it is sent:
//!
//! ```text
//! RTT_N = theoretical RTT of the NFC link for this packet's size   (5.2)
//! RTT_W = recommended initial RTO of the Wi-Fi side (1 s)
//! r     = measured RTT / theoretical RTT of the last measured packet
//! r >= 1: RTT_N, RTT_W scaled by r;  r < 1: RTT_W = max(1 s, r * RTT_W)
//! RTO   = RTT_N + RTT_W rounded up to the 500 ms timer grid
//! ```
//!
//! With `ratio = false` the estimator keeps `r` at 1: each packet's RTO is
//! its theoretical RTT alone, the variant without the variability term.
//! Because `r < 1` leaves both parts at their theory (the NFC part is never
//! faster than theory, `RTT_W` never below its 1 s floor), the two variants
//! differ only while `r > 1`.
//!
//! A retransmission backs off from the lost packet's own estimate, not from
//! the RTO of whatever was sent last.

use std::collections::VecDeque;

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::planned::PlannedRtos;
use super::{
    AckProgress, ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, RttSample,
    Transmission,
};
use crate::serde_duration;

/// Bytes of the MSS option a SYN carries on top of the plain TCP header.
pub const SYN_OPTION_BYTES: u32 = 4;
/// The retransmission timer grid of lwIP's slow timer.
pub const TIMER_GRID: SimDuration = SimDuration::from_millis(500);
/// The recommended initial RTO of the Wi-Fi/Ethernet side (RFC 6298's
/// minimum), the `RTT_WiFi` of equation 5.1.
pub const WIFI_RTT: SimDuration = SimDuration::from_secs(1);

/// What the theoretical RTT of equations 5.1-5.6 needs to know about the
/// NFC link and the packets crossing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NfcChannelModel {
    /// Payload bytes per time slot, `size_chunk` (10 at 11.2 kbps, 26 at
    /// 24 kbps).
    pub payload_per_slot: u32,
    /// Slot period (10 ms).
    #[serde(with = "serde_duration")]
    pub slot_period: SimDuration,
    /// Worst wait for the first slot, `t_maxslotwait` (12 ms: the 2 ms lead
    /// plus a whole slot period).
    #[serde(with = "serde_duration")]
    pub max_slot_wait: SimDuration,
    /// UART baud rate between stack and MCU (115 200).
    pub uart_baud: u32,
    /// Bits per byte on the UART (10: start, 8 data, stop).
    pub uart_bits_per_byte: u32,
    /// IPv4 plus TCP header bytes of a segment without options (40).
    pub headers: u32,
    /// Bytes the UI protocol and MCU framing add to an IP packet (16).
    pub framing: u32,
    /// `RTT_WiFi` of equation 5.1 and the floor of Algorithm 1's scaled
    /// `RTT_W` (1 s).
    #[serde(with = "serde_duration")]
    pub wifi_rtt: SimDuration,
    /// Count whole slots instead of the published fractional slot count
    /// of equation 5.5.
    pub whole_slots: bool,
}

impl Default for NfcChannelModel {
    fn default() -> Self {
        NfcChannelModel::rate_11_2kbps()
    }
}

impl NfcChannelModel {
    /// The 11.2 kbps mode: 10 payload bytes per slot.
    pub const fn rate_11_2kbps() -> Self {
        NfcChannelModel {
            payload_per_slot: 10,
            slot_period: SimDuration::from_millis(10),
            max_slot_wait: SimDuration::from_millis(12),
            uart_baud: 115_200,
            uart_bits_per_byte: 10,
            headers: 40,
            framing: 16,
            wifi_rtt: WIFI_RTT,
            whole_slots: false,
        }
    }

    /// The 24 kbps mode: 26 payload bytes per slot.
    pub const fn rate_24kbps() -> Self {
        NfcChannelModel {
            payload_per_slot: 26,
            ..NfcChannelModel::rate_11_2kbps()
        }
    }

    /// The NFC payload (`size_pckt`) of a segment with `payload` TCP
    /// payload bytes: IP packet plus framing; a SYN also carries the MSS
    /// option.
    pub fn nfc_payload(&self, payload: usize, syn: bool) -> u32 {
        let options = if syn { SYN_OPTION_BYTES } else { 0 };
        (payload.min(u32::MAX as usize) as u32)
            .saturating_add(self.headers + options + self.framing)
    }

    /// Time to move `bytes` over the UART, in nanoseconds.
    fn uart_ns(&self, bytes: f64) -> f64 {
        bytes * f64::from(self.uart_bits_per_byte) * 1e9 / f64::from(self.uart_baud.max(1))
    }

    /// `RTT_NFC` of equation 5.2 for an NFC payload of `size` bytes: both
    /// directions assumed to carry a packet of this size.
    pub fn rtt_nfc(&self, size: u32) -> SimDuration {
        let size = f64::from(size);
        let chunk = f64::from(self.payload_per_slot.max(1));
        let mut slots = size / chunk; // (5.5)
        if self.whole_slots {
            slots = slots.ceil();
        }
        let t_uart = self.uart_ns(size); // (5.3)
        let t_nfc = slots * self.slot_period.as_nanos() as f64; // (5.4)
        let t_uart_chunk = self.uart_ns(chunk); // (5.6)
        let one_way = t_uart + self.max_slot_wait.as_nanos() as f64 + t_nfc + t_uart_chunk;
        SimDuration::from_nanos((2.0 * one_way).round() as u64)
    }

    /// The theoretical RTT of equation 5.1: `RTT_NFC + RTT_WiFi`.
    pub fn rtt(&self, size: u32) -> SimDuration {
        self.rtt_nfc(size) + self.wifi_rtt
    }

    /// The optimum initial RTO (§3.2): the theoretical RTT of an MSS-sized
    /// segment rounded up to the timer grid. Coarse timers fire up to one
    /// period early, so a period of margin on top is recommended; it is not
    /// included here.
    pub fn optimum_initial_rto(&self, mss: usize, grid: SimDuration) -> SimDuration {
        round_up(self.rtt(self.nfc_payload(mss, false)), grid)
    }
}

/// `d` rounded up to a multiple of `grid` (unchanged for a zero grid).
pub fn round_up(d: SimDuration, grid: SimDuration) -> SimDuration {
    if grid.is_zero() {
        return d;
    }
    grid.saturating_mul(d.as_nanos().div_ceil(grid.as_nanos()))
}

/// Parameters of the per-packet estimator (Algorithm 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeRtoConfig {
    /// The link the theoretical RTT describes.
    pub channel: NfcChannelModel,
    /// How many recent ratios `r` to keep; their maximum is used (1: the
    /// plain algorithm, only the last measurement).
    pub window: u32,
    /// Grid the RTO is rounded up to (lwIP's 500 ms slow timer).
    #[serde(with = "serde_duration")]
    pub timer: SimDuration,
    /// Largest RTO after backoff (RFC 6298 (2.5) allows a cap of at least
    /// 60 s).
    #[serde(with = "serde_duration")]
    pub max: SimDuration,
    /// Scale each estimate by the ratio `r` of measured to theoretical RTT
    /// (the variability term: power-control traffic, a slow Wi-Fi side);
    /// false keeps `r` at 1, each packet's RTO from its size alone.
    pub ratio: bool,
}

impl Default for BridgeRtoConfig {
    fn default() -> Self {
        BridgeRtoConfig {
            channel: NfcChannelModel::default(),
            window: 1,
            timer: TIMER_GRID,
            max: SimDuration::from_secs(60),
            ratio: true,
        }
    }
}

impl RtoFactory for BridgeRtoConfig {
    fn name(&self) -> &'static str {
        "bridge"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(BridgeRto::new(*self, ctx))
    }
}

/// Per-connection state of Algorithm 1.
#[derive(Clone, Debug)]
pub struct BridgeRto {
    config: BridgeRtoConfig,
    mss: usize,
    /// Recent ratios of measured to theoretical RTT, newest last.
    ratios: VecDeque<f64>,
    /// The estimate each outstanding segment got before it was first sent.
    planned: PlannedRtos,
}

impl BridgeRto {
    /// Fresh state: `r = 1`, nothing outstanding.
    pub fn new(config: BridgeRtoConfig, ctx: &ConnectionContext) -> Self {
        BridgeRto {
            config,
            mss: ctx.mss,
            ratios: VecDeque::new(),
            planned: PlannedRtos::default(),
        }
    }

    /// The ratio `r` in use: the largest in the window, 1 before any
    /// measurement, and always 1 with `ratio = false`.
    pub fn ratio(&self) -> f64 {
        if !self.config.ratio {
            return 1.0;
        }
        self.ratios.iter().copied().reduce(f64::max).unwrap_or(1.0)
    }

    /// Algorithm 1's RTO, before backoff, for a segment carrying `payload`
    /// TCP payload bytes (a SYN if `syn`).
    pub fn rto_for(&self, payload: usize, syn: bool) -> SimDuration {
        let channel = &self.config.channel;
        let size = channel.nfc_payload(payload, syn);
        let rtt_n = channel.rtt_nfc(size).as_nanos() as f64;
        let rtt_w = channel.wifi_rtt.as_nanos() as f64;
        let r = self.ratio();
        let (rtt_n, rtt_w) = if r >= 1.0 {
            (r * rtt_n, r * rtt_w)
        } else {
            // The NFC link cannot be faster than its theory.
            (rtt_n, rtt_w.max(r * rtt_w))
        };
        let total = SimDuration::from_nanos((rtt_n + rtt_w).round() as u64);
        round_up(total, self.config.timer)
    }

    fn plan(&self, tx: &Transmission) -> SimDuration {
        self.rto_for(payload_of(tx.len, tx.syn), tx.syn)
    }
}

/// TCP payload bytes of a segment occupying `len` of sequence space (a SYN
/// takes one; a FIN's one is counted as a byte).
fn payload_of(len: usize, syn: bool) -> usize {
    len.saturating_sub(usize::from(syn))
}

impl RtoPolicy for BridgeRto {
    fn name(&self) -> &'static str {
        "bridge"
    }

    fn on_transmit(&mut self, _now: SimTime, tx: &Transmission) {
        if self.planned.needs_plan(tx) {
            let rto = self.plan(tx);
            self.planned.record(tx.offset, rto);
        }
    }

    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        // Karn's rule: a sample of a retransmitted segment may belong to
        // either send.
        if !sample.unambiguous() {
            return;
        }
        let channel = &self.config.channel;
        let theory = channel.rtt(channel.nfc_payload(sample.segment_len, false));
        if theory.is_zero() {
            return;
        }
        let r = sample.corrected().as_nanos() as f64 / theory.as_nanos() as f64;
        self.ratios.push_back(r);
        while self.ratios.len() > self.config.window.max(1) as usize {
            self.ratios.pop_front();
        }
    }

    fn on_ack(&mut self, _now: SimTime, ack: &AckProgress) {
        self.planned.on_ack(ack);
    }

    fn on_expiry(&mut self, _now: SimTime, expiry: &Expiry) {
        self.planned.on_expiry(expiry);
    }

    fn timeout_for(&mut self, _now: SimTime, oldest: &Transmission) -> SimDuration {
        self.planned
            .timeout_for(oldest, self.config.max, || self.plan(oldest))
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: None,
            rttvar: None,
            rto: self.rto_for(self.mss, false),
            backoff: self.planned.backoff(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Granularity;
    use crate::rto::test_util::{ctx, sample, tx};

    fn ms(d: SimDuration) -> f64 {
        d.as_nanos() as f64 / 1e6
    }

    fn policy(window: u32) -> BridgeRto {
        let mut c = ctx(Granularity::Fine);
        c.mss = 1024;
        BridgeRto::new(
            BridgeRtoConfig {
                window,
                ..BridgeRtoConfig::default()
            },
            &c,
        )
    }

    #[test]
    fn equation_5_2_matches_the_published_check_values() {
        let slow = NfcChannelModel::rate_11_2kbps();
        assert!((ms(slow.rtt_nfc(1080)) - 2373.24).abs() < 0.005);
        assert!((ms(slow.rtt(1080)) - 3373.24).abs() < 0.005);
        assert_eq!(
            slow.optimum_initial_rto(1024, TIMER_GRID),
            SimDuration::from_millis(3500)
        );
        // "about 1.1 s" for 500 bytes, "about 0.6 s" for 250.
        assert!((ms(slow.rtt_nfc(500)) - 1100.0).abs() < 50.0);
        assert!((ms(slow.rtt_nfc(250)) - 600.0).abs() < 50.0);
        let fast = NfcChannelModel::rate_24kbps();
        assert_eq!(
            fast.optimum_initial_rto(1024, TIMER_GRID),
            SimDuration::from_millis(2500)
        );
        assert_eq!(slow.nfc_payload(1024, false), 1080);
        assert_eq!(slow.nfc_payload(0, false), 56);
    }

    #[test]
    fn whole_slots_round_the_slot_count_up() {
        let published = NfcChannelModel::rate_11_2kbps();
        let whole = NfcChannelModel {
            whole_slots: true,
            ..published
        };
        // 1075 bytes: 107.5 slots published, 108 physical: 2 x 5 ms more.
        let diff = ms(whole.rtt_nfc(1075)) - ms(published.rtt_nfc(1075));
        assert!((diff - 10.0).abs() < 1e-6, "{diff}");
        assert_eq!(whole.rtt_nfc(1080), published.rtt_nfc(1080));
    }

    #[test]
    fn rto_follows_each_packets_own_size() {
        let p = policy(1);
        assert_eq!(p.rto_for(1024, false), SimDuration::from_millis(3500));
        // A bare ACK-sized segment: 2 x (4.86 + 12 + 56 + 0.87) ms + 1 s.
        assert_eq!(p.rto_for(0, false), SimDuration::from_millis(1500));
        // 444 bytes of payload is a 500-byte NFC payload: about 2.1 s.
        assert_eq!(p.rto_for(444, false), SimDuration::from_millis(2500));
    }

    #[test]
    fn ratio_above_one_scales_both_parts_and_below_one_keeps_the_floor() {
        let mut p = policy(1);
        // 1080 bytes: theory 3373.24 ms; measured 6746.48 ms gives r = 2.
        let mut s = sample(6746);
        s.rtt = SimDuration::from_micros(6_746_480);
        s.since_first_transmission = s.rtt;
        s.segment_len = 1024;
        p.on_rtt_sample(SimTime::ZERO, &s);
        assert!((p.ratio() - 2.0).abs() < 1e-4);
        // 2 x 3373.24 = 6746.48 ms, rounded up to 7 s.
        assert_eq!(p.rto_for(1024, false), SimDuration::from_millis(7000));
        // r = 0.5: RTT_N unchanged, RTT_W stays at its 1 s floor.
        s.rtt = SimDuration::from_micros(1_686_620);
        p.on_rtt_sample(SimTime::ZERO, &s);
        assert!((p.ratio() - 0.5).abs() < 1e-4);
        assert_eq!(p.rto_for(1024, false), SimDuration::from_millis(3500));
        // Samples of retransmitted segments are ignored (Karn).
        s.retransmitted = true;
        s.rtt = SimDuration::from_secs(60);
        p.on_rtt_sample(SimTime::ZERO, &s);
        assert!((p.ratio() - 0.5).abs() < 1e-4);
    }

    #[test]
    fn window_uses_the_largest_recent_ratio() {
        let mut p = policy(2);
        let mut s = sample(0);
        s.segment_len = 1024;
        for (micros, expect) in [(6_746_480, 2.0), (3_373_240, 2.0), (3_373_240, 1.0)] {
            s.rtt = SimDuration::from_micros(micros);
            p.on_rtt_sample(SimTime::ZERO, &s);
            assert!((p.ratio() - expect).abs() < 1e-4, "{}", p.ratio());
        }
    }

    #[test]
    fn backoff_starts_from_the_lost_segments_own_estimate() {
        let mut p = policy(1);
        let big = tx(1, 1024, 0);
        let small = tx(1025, 10, 0);
        p.on_transmit(SimTime::ZERO, &big);
        p.on_transmit(SimTime::ZERO, &small);
        assert_eq!(
            p.timeout_for(SimTime::ZERO, &big),
            SimDuration::from_millis(3500)
        );
        p.on_expiry(
            SimTime::ZERO,
            &Expiry {
                segment: big,
                consecutive: 1,
            },
        );
        let resent = tx(1, 1024, 1);
        p.on_transmit(SimTime::ZERO, &resent);
        // 2 x 3.5 s, not 2 x the small segment's 1.5 s.
        assert_eq!(
            p.timeout_for(SimTime::ZERO, &resent),
            SimDuration::from_millis(7000)
        );
        assert_eq!(p.estimate().backoff, 1);
        // Once the big one is acknowledged the small one's own estimate
        // guards it.
        p.on_ack(
            SimTime::ZERO,
            &AckProgress {
                acked_to: 1025,
                newly_acked: 1024,
                syn_acked: false,
                outstanding: true,
                correction: SimDuration::ZERO,
            },
        );
        assert_eq!(
            p.timeout_for(SimTime::ZERO, &small),
            SimDuration::from_millis(1500)
        );
        // The cap applies to backed-off values.
        assert_eq!(
            p.timeout_for(SimTime::ZERO, &tx(1025, 10, 10)),
            SimDuration::from_secs(60)
        );
    }

    /// A sample of a 1024-byte segment `r` times its theoretical RTT
    /// (3373.24 ms).
    fn sample_at_ratio(r: f64) -> RttSample {
        let mut s = sample(0);
        s.segment_len = 1024;
        s.rtt = SimDuration::from_nanos((r * 3_373_240_000.0).round() as u64);
        s.since_first_transmission = s.rtt;
        s
    }

    fn without_ratio() -> BridgeRto {
        let mut c = ctx(Granularity::Fine);
        c.mss = 1024;
        BridgeRto::new(
            BridgeRtoConfig {
                ratio: false,
                ..BridgeRtoConfig::default()
            },
            &c,
        )
    }

    #[test]
    fn without_the_ratio_term_the_rto_is_the_theory_whatever_is_measured() {
        let sizes = [0, 8, 194, 444, 944, 1024];
        for r in [0.2, 0.7, 1.0, 1.3, 2.0, 3.7] {
            let mut with = policy(1);
            let mut without = without_ratio();
            with.on_rtt_sample(SimTime::ZERO, &sample_at_ratio(r));
            without.on_rtt_sample(SimTime::ZERO, &sample_at_ratio(r));
            assert_eq!(without.ratio(), 1.0);
            for payload in sizes {
                let theory = round_up(
                    with.config
                        .channel
                        .rtt(with.config.channel.nfc_payload(payload, false)),
                    TIMER_GRID,
                );
                assert_eq!(without.rto_for(payload, false), theory);
                if r <= 1.0 {
                    // No excess over theory: the variants agree.
                    assert_eq!(with.rto_for(payload, false), theory, "r {r}, {payload} B");
                } else {
                    // r (RTT_N + RTT_W), rounded up to the grid.
                    let rtt = with
                        .config
                        .channel
                        .rtt(with.config.channel.nfc_payload(payload, false));
                    let scaled =
                        SimDuration::from_nanos((r * rtt.as_nanos() as f64).round() as u64);
                    assert_eq!(with.rto_for(payload, false), round_up(scaled, TIMER_GRID));
                    assert!(with.rto_for(payload, false) >= theory);
                    // On the 500 ms grid a small excess may round to the
                    // same RTO (1.3 x 1.15 s is still 1.5 s); r = 2 is not.
                    if r >= 2.0 {
                        assert!(with.rto_for(payload, false) > theory, "r {r}, {payload} B");
                    }
                }
            }
        }
    }

    #[test]
    fn config_reads_from_toml_with_defaults() {
        let c: BridgeRtoConfig =
            toml::from_str("window = 4\n[channel]\npayload_per_slot = 26\n").expect("parses");
        assert_eq!(c.window, 4);
        assert!(c.ratio);
        assert_eq!(c.channel, NfcChannelModel::rate_24kbps());
        let c: BridgeRtoConfig = toml::from_str("ratio = false\n").expect("parses");
        assert!(!c.ratio);
        assert!(toml::from_str::<BridgeRtoConfig>("bogus = 1").is_err());
    }
}

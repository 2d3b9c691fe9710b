//! Stack profiles: named bundles of policies and settings.
//!
//! A [`Profile`] is plain data (serde, unknown fields rejected) so a
//! scenario file can name a profile and override any field; [`Config`] is
//! what a connection runs with, holding the policy factories. Custom
//! policies plug in by replacing a factory in a [`Config`].

use std::sync::Arc;

use rtolab_time::SimDuration;
use serde::{Deserialize, Serialize};

use crate::ack::{
    AckFactory, DelayedAckConfig, DelayedAckTimer, ImmediateAckConfig, SizeAwareAckConfig,
};
use crate::cc::{
    CcFactory, InitialWindow, NewRenoConfig, RenoConfig, SingleSegmentConfig, VegasConfig,
};
use crate::clock::Granularity;
use crate::rto::{
    BridgeRtoConfig, LwipRtoConfig, PerByteRtoConfig, Rfc6298Config, RtoFactory, UipRtoConfig,
};
use crate::{serde_duration, serde_off};

/// The RTO policy of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum RtoChoice {
    /// [`crate::rto::rfc6298`].
    Rfc6298(Rfc6298Config),
    /// [`crate::rto::lwip`].
    Lwip(LwipRtoConfig),
    /// [`crate::rto::uip`].
    Uip(UipRtoConfig),
    /// [`crate::rto::bridge`]: the bridge study's per-packet estimator.
    Bridge(BridgeRtoConfig),
    /// [`crate::rto::per_byte`]: size-aware RTO learned for any channel.
    PerByte(PerByteRtoConfig),
}

impl RtoChoice {
    /// The factory for this choice.
    pub fn factory(&self) -> Arc<dyn RtoFactory> {
        match *self {
            RtoChoice::Rfc6298(c) => Arc::new(c),
            RtoChoice::Lwip(c) => Arc::new(c),
            RtoChoice::Uip(c) => Arc::new(c),
            RtoChoice::Bridge(c) => Arc::new(c),
            RtoChoice::PerByte(c) => Arc::new(c),
        }
    }
}

/// The congestion control of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum CcChoice {
    /// [`crate::cc::reno`].
    Reno(RenoConfig),
    /// [`crate::cc::newreno`].
    Newreno(RenoConfig),
    /// [`crate::cc::vegas`].
    Vegas(VegasConfig),
    /// [`crate::cc::single_segment`].
    SingleSegment(SingleSegmentConfig),
}

impl CcChoice {
    /// The factory for this choice.
    pub fn factory(&self) -> Arc<dyn CcFactory> {
        match *self {
            CcChoice::Reno(c) => Arc::new(c),
            CcChoice::Newreno(c) => Arc::new(NewRenoConfig(c)),
            CcChoice::Vegas(c) => Arc::new(c),
            CcChoice::SingleSegment(c) => Arc::new(c),
        }
    }
}

/// The ACK policy of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum AckChoice {
    /// [`crate::ack::immediate`].
    Immediate(ImmediateAckConfig),
    /// [`crate::ack::delayed`].
    Delayed(DelayedAckConfig),
    /// [`crate::ack::size_aware`].
    SizeAware(SizeAwareAckConfig),
}

impl AckChoice {
    /// The factory for this choice.
    pub fn factory(&self) -> Arc<dyn AckFactory> {
        match *self {
            AckChoice::Immediate(c) => Arc::new(c),
            AckChoice::Delayed(c) => Arc::new(c),
            AckChoice::SizeAware(c) => Arc::new(c),
        }
    }
}

/// Keep-alive settings (RFC 9293 §3.8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeepAlive {
    /// Idle time before the first probe (RFC 1122: at least two hours).
    #[serde(with = "serde_duration")]
    pub idle: SimDuration,
    /// Time between unanswered probes.
    #[serde(with = "serde_duration")]
    pub interval: SimDuration,
    /// Unanswered probes before the connection is dropped.
    pub probes: u32,
}

/// A named bundle of TCP settings and policies.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Name shown in traces.
    pub name: String,
    /// MSS this host announces (and the most it sends).
    pub mss: u16,
    /// Send buffer in bytes: how much unacknowledged and unsent data the
    /// application may queue.
    pub send_buffer: usize,
    /// Receive buffer in bytes: the largest window advertised.
    pub recv_buffer: usize,
    /// Retransmission-timeout policy.
    pub rto: RtoChoice,
    /// Granularity of the retransmission, persist and keep-alive timers.
    pub rto_timer: Granularity,
    /// Retransmissions of one segment before the connection is dropped.
    pub max_retransmissions: u32,
    /// Retransmissions of a SYN before the connection attempt fails.
    pub max_syn_retransmissions: u32,
    /// Congestion control.
    pub cc: CcChoice,
    /// ACK policy.
    pub ack: AckChoice,
    /// Nagle's algorithm (RFC 9293 §3.7.4).
    pub nagle: bool,
    /// Window-scale shift to offer (RFC 7323 §2); `None` (`false` in a
    /// file) to not offer it.
    #[serde(
        default,
        deserialize_with = "serde_off::deserialize",
        skip_serializing_if = "Option::is_none"
    )]
    pub window_scale: Option<u8>,
    /// Offer timestamps (RFC 7323 §3-5: RTTM and PAWS).
    pub timestamps: bool,
    /// Offer SACK (RFC 2018) and use RFC 6675 recovery when agreed.
    pub sack: bool,
    /// Offer the timelost option (timelost spec §2).
    pub timelost: bool,
    /// Keep-alive, off when `None` (`false` in a file).
    #[serde(
        default,
        deserialize_with = "serde_off::deserialize",
        skip_serializing_if = "Option::is_none"
    )]
    pub keepalive: Option<KeepAlive>,
    /// Time spent in TIME-WAIT (2 MSL).
    #[serde(with = "serde_duration")]
    pub time_wait: SimDuration,
    /// Smallest and largest interval between zero-window probes.
    #[serde(with = "serde_duration")]
    pub persist_min: SimDuration,
    /// Largest interval between zero-window probes.
    #[serde(with = "serde_duration")]
    pub persist_max: SimDuration,
    /// IP time to live of emitted datagrams.
    pub ttl: u8,
    /// Limited transmit (RFC 3042): send one new segment on each of the
    /// first two duplicate ACKs. Off unless set.
    #[serde(default)]
    pub limited_transmit: bool,
    /// Eifel response (RFC 4015): when timestamps show a timeout was
    /// spurious (RFC 3522), undo the congestion-window reduction and resume
    /// with new data instead of going back. Off unless set.
    #[serde(default)]
    pub eifel_response: bool,
}

const LWIP_SLOW: SimDuration = SimDuration::from_millis(500);
const LWIP_FAST: SimDuration = SimDuration::from_millis(250);

impl Profile {
    /// The profile called `name` (`lwip`, `uip`, `linux`, `rfc`).
    pub fn named(name: &str) -> Option<Profile> {
        match name {
            "lwip" => Some(Profile::lwip()),
            "uip" => Some(Profile::uip()),
            "linux" => Some(Profile::linux()),
            "rfc" => Some(Profile::rfc()),
            _ => None,
        }
    }

    /// Names accepted by [`Profile::named`].
    pub const NAMES: [&'static str; 4] = ["lwip", "uip", "linux", "rfc"];

    /// A plain RFC host: RFC 6298 timer (1 s minimum), NewReno, delayed
    /// ACKs every second segment or 200 ms, Nagle, no options beyond MSS.
    pub fn rfc() -> Profile {
        Profile {
            name: "rfc".into(),
            mss: 1460,
            send_buffer: 64 * 1024,
            recv_buffer: 64 * 1024,
            rto: RtoChoice::Rfc6298(Rfc6298Config::default()),
            rto_timer: Granularity::Fine,
            max_retransmissions: 15,
            max_syn_retransmissions: 6,
            cc: CcChoice::Newreno(RenoConfig::default()),
            ack: AckChoice::Delayed(DelayedAckConfig::default()),
            nagle: true,
            window_scale: None,
            timestamps: false,
            sack: false,
            timelost: false,
            keepalive: None,
            time_wait: SimDuration::from_secs(60),
            persist_min: SimDuration::from_millis(200),
            persist_max: SimDuration::from_secs(60),
            ttl: 64,
            limited_transmit: false,
            eifel_response: false,
        }
    }

    /// Linux-like: initial RTO 1 s, minimum 200 ms, IW 10, adaptive delayed
    /// ACK (40-200 ms), SACK, timestamps and window scale, NewReno.
    pub fn linux() -> Profile {
        Profile {
            name: "linux".into(),
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            rto: RtoChoice::Rfc6298(Rfc6298Config {
                initial: SimDuration::from_secs(1),
                min: SimDuration::from_millis(200),
                max: SimDuration::from_secs(120),
                granularity: SimDuration::from_millis(1),
                syn_timeout_rule: true,
            }),
            cc: CcChoice::Newreno(RenoConfig {
                initial_window: InitialWindow::Segments(10),
                ..RenoConfig::default()
            }),
            ack: AckChoice::Delayed(DelayedAckConfig {
                segments: 2,
                full_sized_only: true,
                timer: DelayedAckTimer::Adaptive {
                    min: SimDuration::from_millis(40),
                    max: SimDuration::from_millis(200),
                },
            }),
            window_scale: Some(7),
            timestamps: true,
            sack: true,
            ..Profile::rfc()
        }
    }

    /// lwIP 2.1 as configured in the bridge study (bridge spec §1.3): MSS
    /// 1024, initial cwnd 4096 bytes, send buffer 4096, window and cwnd cap
    /// 8096, cwnd +1024 per ACK, initial RTO 1 s on a 500 ms slow timer,
    /// delayed ACK flushed by the 250 ms fast timer, Nagle on.
    pub fn lwip() -> Profile {
        Profile {
            name: "lwip".into(),
            mss: 1024,
            send_buffer: 4096,
            recv_buffer: 8096,
            rto: RtoChoice::Lwip(LwipRtoConfig {
                initial: SimDuration::from_secs(1),
                slow_interval: LWIP_SLOW,
            }),
            // The slow timer runs on every second fast-timer tick.
            rto_timer: Granularity::ticks(LWIP_SLOW, LWIP_FAST),
            // lwIP's TCP_MAXRTX and TCP_SYNMAXRTX.
            max_retransmissions: 12,
            max_syn_retransmissions: 6,
            cc: CcChoice::Reno(RenoConfig {
                initial_window: InitialWindow::Bytes(4096),
                initial_ssthresh: None,
                max_window: Some(8096),
                dup_threshold: 3,
                abc_limit: 1,
            }),
            ack: AckChoice::Delayed(DelayedAckConfig {
                segments: 2,
                full_sized_only: false,
                timer: DelayedAckTimer::Fixed {
                    delay: LWIP_FAST,
                    granularity: Granularity::ticks(LWIP_FAST, SimDuration::ZERO),
                },
            }),
            nagle: true,
            window_scale: None,
            timestamps: false,
            sack: false,
            timelost: false,
            keepalive: None,
            // 2 * TCP_MSL (60 s).
            time_wait: SimDuration::from_secs(120),
            persist_min: LWIP_SLOW,
            persist_max: SimDuration::from_secs(60),
            ttl: 255,
            limited_transmit: false,
            eifel_response: false,
        }
    }

    /// uIP (uip-rto spec §2.1): one unacknowledged segment, `UIP_RTO << n`
    /// retransmission timer on 500 ms pulses (3 s as in the study), no
    /// delayed ACK, no Nagle, no options beyond MSS; 8 retransmissions (a
    /// SYN is sent at most 5 times).
    pub fn uip() -> Profile {
        let pulse = SimDuration::from_millis(500);
        Profile {
            name: "uip".into(),
            mss: 1220,
            send_buffer: 1220,
            recv_buffer: 1220,
            rto: RtoChoice::Uip(UipRtoConfig {
                uip_rto: SimDuration::from_secs(3),
                ..UipRtoConfig::default()
            }),
            rto_timer: Granularity::ticks(pulse, SimDuration::ZERO),
            max_retransmissions: 8,
            // UIP_MAXSYNRTX = 5 counts the first SYN, which uIP sends as a
            // retransmission.
            max_syn_retransmissions: 4,
            cc: CcChoice::SingleSegment(SingleSegmentConfig {}),
            ack: AckChoice::Immediate(ImmediateAckConfig {}),
            nagle: false,
            window_scale: None,
            timestamps: false,
            sack: false,
            timelost: false,
            keepalive: None,
            time_wait: SimDuration::from_secs(60),
            persist_min: pulse,
            persist_max: SimDuration::from_secs(60),
            ttl: 64,
            limited_transmit: false,
            eifel_response: false,
        }
    }
}

/// What a connection runs with: a profile's settings plus its policy
/// factories (replace them to plug in a custom policy).
#[derive(Clone, Debug)]
pub struct Config {
    /// The settings.
    pub profile: Profile,
    /// Builds the RTO policy of each connection.
    pub rto: Arc<dyn RtoFactory>,
    /// Builds the congestion control of each connection.
    pub cc: Arc<dyn CcFactory>,
    /// Builds the ACK policy of each connection.
    pub ack: Arc<dyn AckFactory>,
}

impl Config {
    /// The configuration a profile describes.
    pub fn from_profile(profile: Profile) -> Config {
        Config {
            rto: profile.rto.factory(),
            cc: profile.cc.factory(),
            ack: profile.ack.factory(),
            profile,
        }
    }
}

impl From<Profile> for Config {
    fn from(profile: Profile) -> Config {
        Config::from_profile(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_round_trip_through_toml() {
        for name in Profile::NAMES {
            let p = Profile::named(name).expect("known profile");
            let text = toml::to_string(&p).expect("serialises");
            let back: Profile = toml::from_str(&text).expect("deserialises");
            assert_eq!(back, p, "{name}");
        }
    }

    #[test]
    fn settings_added_later_default_to_off_when_absent() {
        let mut text = toml::to_string(&Profile::linux()).expect("serialises");
        text = text
            .lines()
            .filter(|l| !l.starts_with("limited_transmit") && !l.starts_with("eifel_response"))
            .collect::<Vec<_>>()
            .join("\n");
        let back: Profile = toml::from_str(&text).expect("deserialises");
        assert!(!back.limited_transmit && !back.eifel_response);
    }

    #[test]
    fn unknown_fields_are_rejected_and_named() {
        let mut text = toml::to_string(&Profile::lwip()).expect("serialises");
        text.push_str("\nbogus = 1\n");
        let err = toml::from_str::<Profile>(&text).unwrap_err().to_string();
        assert!(err.contains("bogus"), "{err}");
    }

    /// The linux profile (with keep-alive on) read back with `key`
    /// replaced by the TOML value `value`.
    fn linux_with(key: &str, value: &str) -> Result<Profile, toml::de::Error> {
        let mut p = Profile::linux();
        p.keepalive = Some(KeepAlive {
            idle: SimDuration::from_secs(7200),
            interval: SimDuration::from_secs(75),
            probes: 9,
        });
        let mut table = toml::Table::try_from(&p).expect("serialises");
        let parsed: toml::Table = toml::from_str(&format!("{key} = {value}")).expect("valid TOML");
        table.insert(key.to_string(), parsed[key].clone());
        Profile::deserialize(toml::Value::Table(table))
    }

    #[test]
    fn optional_settings_are_turned_off_with_false() {
        let p = linux_with("window_scale", "false").expect("deserialises");
        assert_eq!(p.window_scale, None);
        let p = linux_with("window_scale", "3").expect("deserialises");
        assert_eq!(p.window_scale, Some(3));
        assert!(p.keepalive.is_some());
        let p = linux_with("keepalive", "false").expect("deserialises");
        assert_eq!(p.keepalive, None);
    }

    #[test]
    fn true_or_a_bad_table_is_not_an_optional_setting() {
        let err = linux_with("window_scale", "true").unwrap_err().to_string();
        assert!(err.contains("false to turn the setting off"), "{err}");
        let err = linux_with("window_scale", "300").unwrap_err().to_string();
        assert!(err.contains("300"), "{err}");
        let table = "{ idle = \"60s\", interval = \"5s\", probes = 3, bogus = 1 }";
        let err = linux_with("keepalive", table).unwrap_err().to_string();
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn lwip_profile_matches_the_bridge_table() {
        let p = Profile::lwip();
        assert_eq!(p.mss, 1024);
        assert_eq!(p.send_buffer, 4096);
        let CcChoice::Reno(reno) = p.cc else {
            panic!("lwip uses reno")
        };
        assert_eq!(reno.initial_window.bytes(1024), 4096);
        assert_eq!(reno.max_window, Some(8096));
        assert_eq!(reno.abc_limit, 1);
        let RtoChoice::Lwip(rto) = p.rto else {
            panic!("lwip timer")
        };
        assert_eq!(rto.initial, SimDuration::from_secs(1));
        assert_eq!(p.rto_timer.period(), Some(SimDuration::from_millis(500)));
        assert!(p.nagle);
    }
}

//! The bridge study's long session (bridge spec §4.3): a user cooks step by
//! step, building the recipe as they go. The appliance sends very small
//! control messages for a long time, long enough for an RTT-learning
//! estimator to adapt its RTO down, then suddenly a large one (a recipe
//! over 1 kB), which the adapted RTO is too short for.
//!
//! The session is `rounds` rounds of a run of small messages followed by
//! one large message. Run lengths and sizes are drawn from the app's own
//! random stream, uniformly within their ranges, when the run starts, so
//! each seed gives another session of the same shape. Each message is a
//! request to an [`super::ExchangeServerApp`] (its 8-byte header says how
//! many bytes to answer with, `reply`) and is written the moment the
//! previous one is acknowledged and answered, as the appliance's
//! application, waiting for each write to complete, sends them; the
//! series itself is a [`MessageSeriesApp`].

use std::net::SocketAddr;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};

use super::exchange::{ExchangeServerSpec, REQUEST_HEADER_LEN};
use super::message_series::{MessageSeriesApp, MessageSeriesConfig, MessageSeriesStats};
use super::registry::{AppCheck, ScenarioApp};
use super::{App, AppCx, AppStats};
use crate::config::{required, Duration, ScenarioError};
use crate::tcp_layer::{FlowId, TcpEvent};

/// An inclusive range `[lo, hi]` a value is drawn from uniformly.
pub type Span = (u32, u32);

/// The session's shape: how many rounds, and the ranges run lengths and
/// sizes are drawn from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionShape {
    /// Rounds of (a run of small messages, then one large message).
    pub rounds: u32,
    /// Small messages in a run.
    pub small_run: Span,
    /// Size of a small message, bytes (header included).
    pub small: Span,
    /// Size of a large message, bytes.
    pub large: Span,
    /// Bytes the end-user device answers each message with (0: none).
    pub reply: u32,
}

impl SessionShape {
    /// The study's text (bridge spec §4.3): control messages under 10 bytes
    /// (8 or 9, the request header being 8), runs of 20 (long enough for
    /// lwIP's estimator to adapt down to its floor, see docs/bridge.md),
    /// recipes over 1 kB (two or three MSS-sized segments), no answers, and
    /// three rounds: about 68 data packets from the appliance.
    pub const STUDY: SessionShape = SessionShape {
        rounds: 3,
        small_run: (20, 20),
        small: (8, 9),
        large: (1025, 3072),
        reply: 0,
    };

    /// Message and response sizes of one session, drawn from `rng`.
    pub fn draw(&self, rng: &mut impl Rng) -> (Vec<u32>, Vec<u32>) {
        let mut sizes = Vec::new();
        for _ in 0..self.rounds {
            let run = rng.gen_range(self.small_run.0..=self.small_run.1);
            for _ in 0..run {
                sizes.push(rng.gen_range(self.small.0..=self.small.1));
            }
            sizes.push(rng.gen_range(self.large.0..=self.large.1));
        }
        let responses = vec![self.reply; sizes.len()];
        (sizes, responses)
    }
}

/// Parameters of a [`CookingSessionApp`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookingSessionConfig {
    /// The exchange server to connect to.
    pub peer: SocketAddr,
    /// The session's shape.
    pub shape: SessionShape,
    /// When to connect.
    pub start: SimTime,
    /// Local port of the connection (ephemeral if `None`).
    pub source_port: Option<u16>,
    /// Write only once the handshake completed.
    pub connect_first: bool,
}

/// Draws its session when the run starts, then sends it as a message
/// series.
pub struct CookingSessionApp {
    config: CookingSessionConfig,
    series: Option<MessageSeriesApp>,
}

impl CookingSessionApp {
    /// A session with `config`, drawn when the run starts.
    pub fn new(config: CookingSessionConfig) -> Self {
        CookingSessionApp {
            config,
            series: None,
        }
    }

    /// A snapshot of the app's counters (those of its message series).
    pub fn stats(&self) -> AppStats {
        let stats = match self.series.as_ref().map(MessageSeriesApp::stats) {
            Some(AppStats::MessageSeries(s)) => s,
            _ => MessageSeriesStats::default(),
        };
        AppStats::CookingSession(stats)
    }
}

impl<C: AppCx> App<C> for CookingSessionApp {
    fn on_start(&mut self, cx: &mut C) {
        let (sizes, responses) = self.config.shape.draw(cx.rng());
        let mut series = MessageSeriesApp::new(MessageSeriesConfig {
            peer: self.config.peer,
            sizes,
            gaps: Vec::new(),
            start: self.config.start,
            responses,
            source_port: self.config.source_port,
            connect_first: self.config.connect_first,
            after_ack: true,
        });
        App::<C>::on_start(&mut series, cx);
        self.series = Some(series);
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, cx: &mut C, token: u64) {
        if let Some(series) = &mut self.series {
            series.on_timer(cx, token);
        }
    }

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        if let Some(series) = &mut self.series {
            series.on_tcp(cx, flow, event);
        }
    }

    fn stats(&self) -> AppStats {
        CookingSessionApp::stats(self)
    }
}

// ----- scenario side: `kind = "cooking-session"` -----

/// The `[[app]]` fields of a cooking session.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCookingSession {
    /// Address and port of the `exchange-server` it connects to. Required.
    peer: Option<SocketAddr>,
    /// Rounds of (a run of small messages, then one large message). Default: 3.
    rounds: Option<u32>,
    /// Range `[lo, hi]` the number of small messages in a run is drawn from. Default: `[20,
    /// 20]`.
    small_run: Option<Vec<u32>>,
    /// Range `[lo, hi]` of a small message's size, its 8-byte header included. Unit: bytes.
    /// Default: `[8, 9]`.
    small: Option<Vec<u32>>,
    /// Range `[lo, hi]` of a large message's size. Unit: bytes. Default: `[1025, 3072]`.
    large: Option<Vec<u32>>,
    /// Bytes the end-user device answers each message with (0: none). Unit: bytes. Default: 0.
    reply: Option<u32>,
    /// When it connects. Default: `"0s"`.
    start: Option<Duration>,
    /// Local port of its connection. Default: an ephemeral port.
    source_port: Option<u16>,
    /// Write only once the handshake completed. Default: false.
    connect_first: Option<bool>,
}

/// `kind = "cooking-session"`: the bridge study's long session
/// ([`CookingSessionApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CookingSessionSpec {
    /// The exchange server's address and port.
    pub peer: SocketAddr,
    /// The session's shape.
    pub shape: SessionShape,
    /// When to connect.
    pub start: SimDuration,
    /// Local port of the connection.
    pub source_port: Option<u16>,
    /// Write only after the handshake.
    pub connect_first: bool,
}

/// A `[lo, hi]` range field, at least `min`; `default` when left out.
fn span(
    value: &Option<Vec<u32>>,
    field: &str,
    min: u32,
    default: Span,
    cx: &AppCheck<'_>,
) -> Result<Span, ScenarioError> {
    let Some(value) = value else {
        return Ok(default);
    };
    let &[lo, hi] = value.as_slice() else {
        return Err(ScenarioError::new(
            cx.at(field),
            format!("must be a range [lo, hi], got {} values", value.len()),
        ));
    };
    if lo > hi {
        return Err(ScenarioError::new(
            cx.at(field),
            format!("must have lo <= hi, got [{lo}, {hi}]"),
        ));
    }
    if lo < min {
        return Err(ScenarioError::new(
            cx.at(field),
            format!("must be at least {min}, got [{lo}, {hi}]"),
        ));
    }
    Ok((lo, hi))
}

impl ScenarioApp for CookingSessionSpec {
    const KIND: &'static str = "cooking-session";
    const TCP: bool = true;
    type Raw = RawCookingSession;
    type App = CookingSessionApp;
    type Stats = MessageSeriesStats;

    fn validate(raw: RawCookingSession, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let (start, _) = cx.start_stop(raw.start.map(|d| d.0), None)?;
        let peer = required(&raw.peer, cx.at("peer"), &cx.what)?;
        let peer = cx.remote("peer", peer)?;
        let study = SessionShape::STUDY;
        let rounds = raw.rounds.unwrap_or(study.rounds);
        if rounds == 0 {
            return Err(ScenarioError::new(cx.at("rounds"), "must be positive"));
        }
        // Each message carries the exchange header.
        let header = REQUEST_HEADER_LEN as u32;
        let shape = SessionShape {
            rounds,
            small_run: span(&raw.small_run, "small_run", 0, study.small_run, cx)?,
            small: span(&raw.small, "small", header, study.small, cx)?,
            large: span(&raw.large, "large", header, study.large, cx)?,
            reply: raw.reply.unwrap_or(study.reply),
        };
        Ok(CookingSessionSpec {
            peer,
            shape,
            start,
            source_port: raw.source_port,
            connect_first: raw.connect_first.unwrap_or(false),
        })
    }

    fn build(&self) -> CookingSessionApp {
        CookingSessionApp::new(CookingSessionConfig {
            peer: self.peer,
            shape: self.shape.clone(),
            start: SimTime::ZERO + self.start,
            source_port: self.source_port,
            connect_first: self.connect_first,
        })
    }

    fn server(&self) -> Option<(SocketAddr, &'static str)> {
        Some((self.peer, ExchangeServerSpec::KIND))
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::rng::SimRng;

    #[test]
    fn a_session_is_runs_of_small_messages_each_followed_by_one_large() {
        let shape = SessionShape {
            rounds: 4,
            small_run: (3, 6),
            small: (8, 9),
            large: (1025, 3072),
            reply: 5,
        };
        let (sizes, responses) = shape.draw(&mut SimRng::seed_from_u64(3));
        assert_eq!(responses, vec![5; sizes.len()]);
        let runs: Vec<&[u32]> = sizes.split(|&s| s > 1024).collect();
        // Four large messages, the last one ending the session.
        assert_eq!(runs.len(), 5);
        assert!(runs[4].is_empty());
        for run in &runs[..4] {
            assert!((3..=6).contains(&run.len()), "run of {}", run.len());
            assert!(run.iter().all(|s| (8..=9).contains(s)));
        }
    }

    #[test]
    fn the_study_shape_gives_about_68_data_packets() {
        // Each small message is one segment, each large one ceil(size / MSS).
        let (sizes, _) = SessionShape::STUDY.draw(&mut SimRng::seed_from_u64(1));
        let packets: u32 = sizes.iter().map(|s| s.div_ceil(1024)).sum();
        assert!((66..=69).contains(&packets), "{packets} data packets");
        assert!(sizes.iter().filter(|&&s| s < 10).count() == 60);
    }
}

//! The settings an lwIP host reads from its scenario: its `lwip` table
//! and the app kinds it runs. The scenario reader checks them; the host
//! ([`crate::lwip`]) runs with them.

use rtolab_sim::units::parse_duration;
use rtolab_sim::ScenarioError;
use rtolab_time::SimDuration;

/// lwIP's slow timer (`TCP_SLOW_INTERVAL`, 2 × `TCP_TMR_INTERVAL` of
/// 250 ms): RTOs are whole ticks of it.
pub const SLOW_TICK: SimDuration = SimDuration::from_millis(500);

/// The Debian build's `TCP_MSS`.
pub const DEBIAN_MSS: u16 = 1460;

/// IPv4 and TCP headers without options: the MTU lwIP needs for an MSS.
const HEADERS: u16 = 40;

/// The app kinds the program runs.
pub const LWIP_KINDS: &[&str] = &["exchange-server", "tcp-sink", "exchange", "tcp-bulk"];

/// Run-time settings of an lwIP host (`lwip = { ... }` in its `[[host]]`
/// table). Everything else is fixed when Debian builds the library.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LwipOptions {
    /// Initial retransmission timeout of every connection, a whole number
    /// of 500 ms ticks (lwIP 2.1 fixes 3 s at compile time; the program
    /// writes the value into each new connection's control block).
    pub initial_rto: Option<SimDuration>,
    /// Largest segment to send and to announce: the interface MTU is set
    /// to this plus 40, and lwIP derives both from the MTU. At most the
    /// build's `TCP_MSS` (1460).
    pub mss: Option<u16>,
}

fn error(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

impl LwipOptions {
    /// Reads host `i`'s `lwip` table.
    pub fn from_toml(i: usize, value: &toml::Value) -> Result<LwipOptions, ScenarioError> {
        let toml::Value::Table(t) = value else {
            return Err(error(format!("host[{i}].lwip"), "expected a table"));
        };
        let mut options = LwipOptions::default();
        for (key, v) in t {
            let path = format!("host[{i}].lwip.{key}");
            match key.as_str() {
                "initial_rto" => {
                    let text = v.as_str().ok_or_else(|| {
                        error(&path, "expected a duration with a unit, like \"1s\"")
                    })?;
                    let d = parse_duration(text).map_err(|e| error(&path, e.to_string()))?;
                    let ticks = d.as_nanos() / SLOW_TICK.as_nanos();
                    if d.is_zero() || d.as_nanos() % SLOW_TICK.as_nanos() != 0 {
                        return Err(error(
                            &path,
                            "must be a positive multiple of 500ms (lwIP counts its RTO in 500 ms ticks)",
                        ));
                    }
                    if ticks > i16::MAX as u64 {
                        return Err(error(&path, "too long for lwIP's 16-bit tick count"));
                    }
                    options.initial_rto = Some(d);
                }
                "mss" => {
                    let mss = v
                        .as_integer()
                        .filter(|m| (64..=i64::from(DEBIAN_MSS)).contains(m))
                        .ok_or_else(|| {
                            error(
                                &path,
                                format!("expected an integer from 64 to {DEBIAN_MSS} (the build's TCP_MSS)"),
                            )
                        })?;
                    options.mss = Some(mss as u16);
                }
                _ => {
                    return Err(error(
                        path,
                        "unknown field (expected initial_rto, mss; the rest is fixed when lwIP is built)",
                    ))
                }
            }
        }
        Ok(options)
    }

    /// The interface MTU that gives this MSS.
    pub fn mtu(&self) -> u16 {
        self.mss.unwrap_or(DEBIAN_MSS) + HEADERS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Value {
        toml::Value::Table(text.parse().unwrap())
    }

    #[test]
    fn options_are_read_and_checked() {
        let o = LwipOptions::from_toml(2, &table("initial_rto = \"1s\"\nmss = 1024")).unwrap();
        assert_eq!(o.initial_rto, Some(SimDuration::from_secs(1)));
        assert_eq!(o.mtu(), 1064);
        assert_eq!(LwipOptions::default().mtu(), 1500);
        for (text, path) in [
            ("initial_rto = \"1.2s\"", "host[2].lwip.initial_rto"),
            ("initial_rto = \"0s\"", "host[2].lwip.initial_rto"),
            ("initial_rto = 3", "host[2].lwip.initial_rto"),
            ("mss = 1500", "host[2].lwip.mss"),
            ("window = 8096", "host[2].lwip.window"),
        ] {
            let e = LwipOptions::from_toml(2, &table(text)).unwrap_err();
            assert_eq!(e.path, path, "{text}: {e}");
        }
    }
}

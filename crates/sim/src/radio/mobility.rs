//! Where a radio is at a given time: a fixed position, or waypoints joined
//! at constant velocity.
//!
//! ```toml
//! mobility = { position = { x = 0.0, y = 40.0 } }
//! # or
//! mobility = { waypoints = [ { at = "0s", x = 0.0, y = 0.0 },
//!                            { at = "60s", x = 120.0, y = 0.0 } ] }
//! ```

use rtolab_time::SimTime;
use serde::Deserialize;

use crate::config::{check_position, Duration, ScenarioError};
use crate::position::Position;

/// A point a moving radio passes at a given time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Waypoint {
    /// When the radio is there.
    pub at: SimTime,
    /// Where, metres.
    pub position: Position,
}

/// How a radio moves.
#[derive(Clone, Debug, PartialEq)]
pub enum Mobility {
    /// It stays put.
    Static(Position),
    /// It moves in straight lines at constant speed from each waypoint to
    /// the next, stays at the first before its time and at the last after
    /// it. At least one waypoint, times strictly increasing.
    Waypoints(Vec<Waypoint>),
}

impl Mobility {
    /// The position at `at`.
    pub fn position_at(&self, at: SimTime) -> Position {
        let points = match self {
            Mobility::Static(p) => return *p,
            Mobility::Waypoints(points) => points,
        };
        // The first waypoint later than `at`; the radio is on the leg
        // ending there.
        let next = points.partition_point(|w| w.at <= at);
        match (next.checked_sub(1).map(|i| points[i]), points.get(next)) {
            (Some(from), Some(to)) => {
                let leg = (to.at - from.at).as_nanos() as f64;
                let f = (at - from.at).as_nanos() as f64 / leg;
                Position {
                    x: from.position.x + f * (to.position.x - from.position.x),
                    y: from.position.y + f * (to.position.y - from.position.y),
                }
            }
            (Some(last), None) => last.position,
            (None, Some(first)) => first.position,
            // Validation keeps at least one waypoint; stay at the origin
            // rather than fail if a caller built an empty list by hand.
            (None, None) => Position::default(),
        }
    }

    /// Waypoints, checked: at least one, finite coordinates, times strictly
    /// increasing. `path` names the list in errors.
    pub fn waypoints(points: Vec<Waypoint>, path: &str) -> Result<Mobility, ScenarioError> {
        if points.is_empty() {
            return Err(ScenarioError::new(path, "needs at least one waypoint"));
        }
        for (i, w) in points.iter().enumerate() {
            check_position(format!("{path}[{i}]"), &w.position)?;
            if i > 0 && w.at <= points[i - 1].at {
                return Err(ScenarioError::new(
                    format!("{path}[{i}].at"),
                    format!(
                        "must be later than the previous waypoint's ({}), got {}",
                        points[i - 1].at,
                        w.at
                    ),
                ));
            }
        }
        Ok(Mobility::Waypoints(points))
    }

    /// Reads and validates a `mobility` table (`path` is the table's).
    pub fn from_raw(raw: RawMobility, path: &str) -> Result<Mobility, ScenarioError> {
        match (raw.position, raw.waypoints) {
            (Some(p), None) => {
                check_position(format!("{path}.position"), &p)?;
                Ok(Mobility::Static(p))
            }
            (None, Some(points)) => Mobility::waypoints(
                points
                    .into_iter()
                    .map(|w| Waypoint {
                        at: SimTime::ZERO + w.at.0,
                        position: Position { x: w.x, y: w.y },
                    })
                    .collect(),
                &format!("{path}.waypoints"),
            ),
            (Some(_), Some(_)) => Err(ScenarioError::new(
                format!("{path}.waypoints"),
                "not allowed together with position",
            )),
            (None, None) => Err(ScenarioError::new(
                format!("{path}.position"),
                "required (or waypoints)",
            )),
        }
    }
}

/// The fields of a `mobility` table: `position`, or `waypoints`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMobility {
    /// A fixed position, `{ x, y }` in metres; not with `waypoints`. Default: none.
    position: Option<Position>,
    /// Positions at given times, `{ at, x, y }` each, in time order; the node moves in a
    /// straight line between them. Default: none.
    waypoints: Option<Vec<RawWaypoint>>,
}

/// One waypoint as written: `{ at = "10s", x = 1.0, y = 2.0 }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWaypoint {
    /// When the node is there, since the run began. Required.
    at: Duration,
    /// Its x coordinate. Unit: m. Required.
    x: f64,
    /// Its y coordinate. Unit: m. Required.
    y: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::deserialize_at;

    fn at(secs: u64, x: f64, y: f64) -> Waypoint {
        Waypoint {
            at: SimTime::from_secs(secs),
            position: Position { x, y },
        }
    }

    #[test]
    fn waypoints_interpolate_linearly_and_hold_the_ends() {
        let m = Mobility::waypoints(
            vec![at(10, 0.0, 0.0), at(20, 100.0, 0.0), at(30, 100.0, 50.0)],
            "w",
        )
        .unwrap();
        let p = |ms: u64| m.position_at(SimTime::from_millis(ms));
        assert_eq!(p(0), Position { x: 0.0, y: 0.0 });
        assert_eq!(p(10_000), Position { x: 0.0, y: 0.0 });
        assert_eq!(p(12_500), Position { x: 25.0, y: 0.0 });
        assert_eq!(p(20_000), Position { x: 100.0, y: 0.0 });
        assert_eq!(p(29_000), Position { x: 100.0, y: 45.0 });
        assert_eq!(p(30_000), Position { x: 100.0, y: 50.0 });
        assert_eq!(p(99_000), Position { x: 100.0, y: 50.0 });
        let still = Mobility::Static(Position { x: 3.0, y: 4.0 });
        assert_eq!(
            still.position_at(SimTime::from_secs(5)),
            Position { x: 3.0, y: 4.0 }
        );
    }

    #[test]
    fn tables_parse_and_errors_name_the_field() {
        let read = |text: &str| {
            let value = toml::Value::Table(text.parse().unwrap());
            deserialize_at::<RawMobility>(value, "radio[1].mobility")
                .and_then(|raw| Mobility::from_raw(raw, "radio[1].mobility"))
        };
        assert_eq!(
            read("position = { x = 1, y = 2 }").unwrap(),
            Mobility::Static(Position { x: 1.0, y: 2.0 })
        );
        let m = read("waypoints = [{ at = \"0s\", x = 0, y = 0 }, { at = \"2s\", x = 4, y = 0 }]")
            .unwrap();
        assert_eq!(
            m.position_at(SimTime::from_secs(1)),
            Position { x: 2.0, y: 0.0 }
        );
        let e = read("waypoints = [{ at = \"2s\", x = 0, y = 0 }, { at = \"2s\", x = 4, y = 0 }]")
            .unwrap_err();
        assert_eq!(e.path, "radio[1].mobility.waypoints[1].at");
        let e = read("waypoints = []").unwrap_err();
        assert_eq!(e.path, "radio[1].mobility.waypoints");
        let e = read("").unwrap_err();
        assert_eq!(e.path, "radio[1].mobility.position");
        let e = read("waypoints = [{ at = \"1s\", x = 0 }]").unwrap_err();
        assert_eq!(e.path, "radio[1].mobility.waypoints[0].y");
        let e = read("position = { x = 1, y = 2 }\nspeed = 3").unwrap_err();
        assert_eq!(e.path, "radio[1].mobility.speed");
    }
}

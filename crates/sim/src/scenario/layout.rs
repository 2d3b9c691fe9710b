//! Host groups: many hosts placed by a generator instead of one `[[host]]`
//! table each.
//!
//! ```toml
//! [[host_group]]
//! prefix = "n"                                    # hosts n1, n2, …
//! grid = { rows = 4, cols = 4, spacing = "40m" }  # row by row from origin
//! # or: random = { count = 16, width = "200m", height = "200m" }
//! profile = "linux"                               # optional, as on [[host]]
//! ```
//!
//! A grid numbers its hosts row by row: `n1` at the origin, `n2` one
//! spacing east, `n{cols + 1}` one spacing north of `n1`. A random layout
//! draws each position uniformly in the rectangle from its own `seed`
//! (default: the scenario's), not from a run's seed override: a sweep over
//! run seeds then compares schemes on one topology, as studies that vary
//! seeds over a fixed Cooja placement do; change `seed` for another layout.

use rand::Rng;

use super::raw::{RawGrid, RawHost, RawHostGroup, RawRandom};
use crate::config::{check_position, ScenarioError};
use crate::position::Position;
use crate::rng::component_stream;

/// Most hosts one group may generate: far beyond any radio study, small
/// enough that a typo (`rows = 40000`) is an error rather than a run that
/// fills memory.
pub const MAX_GROUP_HOSTS: u64 = 100_000;

/// The hosts of group `index`, named `{prefix}{k}` for k from 1.
/// `scenario_seed` is the default seed of a random layout.
pub(super) fn expand(
    index: usize,
    group: &RawHostGroup,
    scenario_seed: u64,
) -> Result<Vec<RawHost>, ScenarioError> {
    let at = |field: &str| format!("host_group[{index}].{field}");
    if group.prefix.is_empty() {
        return Err(ScenarioError::new(at("prefix"), "must not be empty"));
    }
    let positions = match (&group.grid, &group.random) {
        (Some(grid), None) => grid_positions(grid, &at)?,
        (None, Some(random)) => random_positions(random, &group.prefix, scenario_seed, &at)?,
        (None, None) => {
            return Err(ScenarioError::new(
                format!("host_group[{index}]"),
                "needs a layout: grid = { … } or random = { … }",
            ))
        }
        (Some(_), Some(_)) => {
            return Err(ScenarioError::new(
                at("random"),
                "a group has one layout: grid or random, not both",
            ))
        }
    };
    Ok(positions
        .into_iter()
        .enumerate()
        .map(|(k, position)| RawHost {
            name: format!("{}{}", group.prefix, k + 1),
            bridge: None,
            position: Some(position),
            profile: group.profile.clone(),
            tcp: group.tcp.clone(),
            stack: None,
        })
        .collect())
}

fn grid_positions(
    grid: &RawGrid,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<Position>, ScenarioError> {
    let origin = checked_origin(grid.origin, &|f| at(&format!("grid.{f}")))?;
    for (field, n) in [("rows", grid.rows), ("cols", grid.cols)] {
        if n == 0 {
            return Err(ScenarioError::new(
                at(&format!("grid.{field}")),
                "must be at least 1",
            ));
        }
    }
    check_count(grid.rows.saturating_mul(grid.cols), at("grid"))?;
    if grid.spacing.0 <= 0.0 {
        return Err(ScenarioError::new(at("grid.spacing"), "must be positive"));
    }
    let spacing = grid.spacing.0;
    Ok((0..grid.rows)
        .flat_map(|row| {
            (0..grid.cols).map(move |col| Position {
                x: origin.x + col as f64 * spacing,
                y: origin.y + row as f64 * spacing,
            })
        })
        .collect())
}

fn random_positions(
    random: &RawRandom,
    prefix: &str,
    scenario_seed: u64,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<Position>, ScenarioError> {
    let origin = checked_origin(random.origin, &|f| at(&format!("random.{f}")))?;
    if random.count == 0 {
        return Err(ScenarioError::new(at("random.count"), "must be at least 1"));
    }
    check_count(random.count, at("random.count"))?;
    for (field, d) in [("width", random.width), ("height", random.height)] {
        if d.0 <= 0.0 {
            return Err(ScenarioError::new(
                at(&format!("random.{field}")),
                "must be positive",
            ));
        }
    }
    let seed = random.seed.unwrap_or(scenario_seed);
    let mut rng = component_stream(seed, &format!("host_group/{prefix}"));
    Ok((0..random.count)
        .map(|_| Position {
            x: origin.x + rng.gen::<f64>() * random.width.0,
            y: origin.y + rng.gen::<f64>() * random.height.0,
        })
        .collect())
}

fn checked_origin(
    origin: Option<Position>,
    at: &dyn Fn(&str) -> String,
) -> Result<Position, ScenarioError> {
    let origin = origin.unwrap_or_default();
    check_position(at("origin"), &origin)?;
    Ok(origin)
}

fn check_count(count: u64, path: String) -> Result<(), ScenarioError> {
    if count > MAX_GROUP_HOSTS {
        return Err(ScenarioError::new(
            path,
            format!("{count} hosts, more than the {MAX_GROUP_HOSTS} a group may have"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;
    use crate::position::Position;

    fn scenario(groups: &str) -> Result<Scenario, String> {
        let text = format!("name = \"g\"\nduration = \"1s\"\nseed = 7\n{groups}");
        Scenario::from_toml_str(&text).map_err(|e| e.to_string())
    }

    fn positions(s: &Scenario) -> Vec<(String, Position)> {
        s.hosts
            .iter()
            .map(|h| {
                (
                    h.name.clone(),
                    h.position.expect("generated hosts have positions"),
                )
            })
            .collect()
    }

    #[test]
    fn a_grid_numbers_hosts_row_by_row_from_the_origin() {
        let s = scenario(
            "[[host_group]]\nprefix = \"n\"\n\
             grid = { rows = 2, cols = 3, spacing = \"40m\", origin = { x = 10, y = 5 } }\n",
        )
        .unwrap();
        let expected = [
            (10.0, 5.0),
            (50.0, 5.0),
            (90.0, 5.0),
            (10.0, 45.0),
            (50.0, 45.0),
            (90.0, 45.0),
        ];
        let got = positions(&s);
        assert_eq!(got.len(), 6);
        for (k, ((name, p), (x, y))) in got.iter().zip(expected).enumerate() {
            assert_eq!(name, &format!("n{}", k + 1));
            assert_eq!((p.x, p.y), (x, y), "{name}");
        }
    }

    #[test]
    fn generated_hosts_attach_to_links_and_take_the_group_profile() {
        let s = scenario(
            "[[host]]\nname = \"server\"\nposition = { x = 0, y = -40 }\n\
             [[host_group]]\nprefix = \"n\"\nprofile = \"linux\"\n\
             grid = { rows = 1, cols = 2, spacing = \"40m\" }\n\
             [[link]]\nname = \"air\"\nkind = \"broadcast\"\nrate = \"250kbps\"\n\
             tx_range = 50.0\ninterference_range = 100.0\nmembers = [\n\
             { host = \"server\", address = \"10.0.0.1/24\" },\n\
             { host = \"n1\", address = \"10.0.0.2/24\" },\n\
             { host = \"n2\", address = \"10.0.0.3/24\" } ]\n",
        )
        .unwrap();
        let names: Vec<_> = s.hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["server", "n1", "n2"]);
        assert!(s.hosts[0].tcp.is_none());
        assert!(s.hosts[1].tcp.is_some() && s.hosts[2].tcp.is_some());
    }

    #[test]
    fn a_random_layout_follows_its_seed_and_stays_in_the_rectangle() {
        let group = |seed: &str| {
            scenario(&format!(
                "[[host_group]]\nprefix = \"r\"\n\
                 random = {{ count = 50, width = \"200m\", height = \"100m\", origin = {{ x = -100, y = 0 }}{seed} }}\n"
            ))
            .unwrap()
        };
        let a = positions(&group(""));
        let b = positions(&group(", seed = 7"));
        let c = positions(&group(", seed = 8"));
        assert_eq!(a, b, "the default seed is the scenario's");
        assert_ne!(a, c);
        for (name, p) in &a {
            assert!(
                (-100.0..100.0).contains(&p.x) && (0.0..100.0).contains(&p.y),
                "{name}: {p:?}"
            );
        }
    }

    #[test]
    fn mistakes_name_the_field() {
        let cases = [
            ("prefix = \"n\"\ngrid = { rows = 0, cols = 4, spacing = \"40m\" }", "host_group[0].grid.rows: must be at least 1"),
            ("prefix = \"n\"\ngrid = { rows = 4, cols = 4, spacing = \"0m\" }", "host_group[0].grid.spacing: must be positive"),
            ("prefix = \"n\"\ngrid = { rows = 4, cols = 4, spacing = \"40\" }", "host_group[0].grid.spacing"),
            ("prefix = \"n\"\ngrid = { rows = 1000, cols = 1000, spacing = \"1m\" }", "host_group[0].grid: 1000000 hosts, more than the 100000"),
            ("prefix = \"n\"", "host_group[0]: needs a layout"),
            ("prefix = \"\"\ngrid = { rows = 1, cols = 1, spacing = \"1m\" }", "host_group[0].prefix: must not be empty"),
            (
                "prefix = \"n\"\ngrid = { rows = 1, cols = 1, spacing = \"1m\" }\nrandom = { count = 1, width = \"1m\", height = \"1m\" }",
                "host_group[0].random: a group has one layout",
            ),
            ("prefix = \"n\"\nrandom = { count = 3, width = \"1m\", height = \"0m\" }", "host_group[0].random.height: must be positive"),
            ("prefix = \"n\"\nprofile = \"nonesuch\"\ngrid = { rows = 1, cols = 1, spacing = \"1m\" }", "host_group[0].profile"),
        ];
        for (group, expected) in cases {
            let err = scenario(&format!("[[host_group]]\n{group}\n")).unwrap_err();
            assert!(err.contains(expected), "{group:?}: {err}");
        }
        let err = scenario(
            "[[host]]\nname = \"n2\"\n[[host_group]]\nprefix = \"n\"\n\
             grid = { rows = 1, cols = 3, spacing = \"1m\" }\n",
        )
        .unwrap_err();
        assert!(
            err.contains("host_group[0].prefix: generates host \"n2\", already defined by host[0]"),
            "{err}"
        );
    }
}

//! Named TCP profiles and the `tcp` override tables merged onto them.

use rtolab_tcp::Profile;

use crate::config::{deserialize_at, ScenarioError};

/// TCP profile of hosts and apps that name none.
pub const DEFAULT_TCP_PROFILE: &str = "linux";

pub(super) fn default_profile() -> Profile {
    Profile::linux()
}

pub(super) fn named_profile(name: &str, path: String) -> Result<Profile, ScenarioError> {
    Profile::named(name).ok_or_else(|| {
        ScenarioError::new(
            path,
            format!(
                "unknown profile {name:?} (expected one of {})",
                Profile::NAMES.join(", ")
            ),
        )
    })
}

/// The profile named `name` (or `base` when none is named) with the
/// `overrides` table applied and its settings checked
/// ([`Profile::validate`]); `at(field)` names fields in errors.
pub(super) fn resolve(
    name: Option<&str>,
    overrides: Option<&toml::Table>,
    base: impl FnOnce() -> Profile,
    at: impl Fn(&str) -> String,
) -> Result<Profile, ScenarioError> {
    let base = match name {
        Some(name) => named_profile(name, at("profile"))?,
        None => base(),
    };
    let profile = match overrides {
        Some(t) => apply_overrides(&base, t, &at("tcp"))?,
        None => base,
    };
    // Named profiles are valid, so an error comes from an override.
    profile
        .validate()
        .map_err(|e| ScenarioError::new(format!("{}.{}", at("tcp"), e.field), e.message))?;
    Ok(profile)
}

/// Applies a `tcp` override table to `base`: the table is merged onto the
/// profile's own TOML form and the result deserialised, so any profile
/// field can be overridden and unknown ones are rejected with their path
/// (`app[0].tcp.rto.bogus: unknown field (...)`).
pub(super) fn apply_overrides(
    base: &Profile,
    overrides: &toml::Table,
    path: &str,
) -> Result<Profile, ScenarioError> {
    let mut table = match toml::Value::try_from(base) {
        Ok(toml::Value::Table(t)) => t,
        Ok(_) => return Err(ScenarioError::new(path, "profile is not a table")),
        Err(e) => return Err(ScenarioError::new(path, e.to_string())),
    };
    merge_table(&mut table, overrides);
    deserialize_at(toml::Value::Table(table), path)
}

/// Merges `overrides` into `base`, key by key; sub-tables merge when they
/// describe the same choice and replace it otherwise.
fn merge_table(base: &mut toml::Table, overrides: &toml::Table) {
    for (key, value) in overrides {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) if same_choice(b, o) => {
                merge_table(b, o);
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Whether an override continues the base's choice of a policy or variant.
/// Internally tagged choices (`rto`, `cc`, `ack`) name theirs in `policy`;
/// externally tagged ones (`rto_timer`, `initial_window`, `ack.timer`) are
/// one-key tables named after the variant. Plain structs always merge.
fn same_choice(base: &toml::Table, overrides: &toml::Table) -> bool {
    match (base.get("policy"), overrides.get("policy")) {
        (Some(b), Some(o)) => b == o,
        (Some(_), None) => true,
        _ if base.len() == 1 && overrides.len() == 1 => base.keys().eq(overrides.keys()),
        _ => true,
    }
}

//! The policy registry: every RTO, congestion-control and ACK policy a
//! profile can select by name, registered in one place.
//!
//! A policy is one module (in `rto/`, `cc/` or `ack/`) whose configuration
//! type implements the family's factory trait, [`Default`] and serde with
//! `deny_unknown_fields, default`, plus one registration line in the family's
//! list below. The line `fixed => Fixed(FixedRtoConfig)` generates:
//!
//! * the enum variant `RtoChoice::Fixed`, written `{ policy = "fixed", ... }`
//!   in a profile (serde's internal tag; the name is the variant in
//!   snake_case and must equal the module's name, which a test checks);
//! * its arm of the family's `factory()`;
//! * its entry in the family's `NAMES`;
//! * its entry in [`policy_catalog`]: the name, the first sentence of the
//!   module's documentation as description, the serialized [`Default`]
//!   configuration as parameters with their defaults, and each
//!   parameter's meaning, the first sentence of its field's documentation
//!   (in the module, or for fields of a configuration shared with another
//!   policy, in `SHARED_CONFIG_SOURCES`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ack::{AckFactory, DelayedAckConfig, ImmediateAckConfig, SizeAwareAckConfig};
use crate::cc::{
    CcFactory, NewRenoConfig, RenoConfig, SingleSegmentConfig, TibetConfig, VegasConfig,
    VegasNs2Config, WestwoodConfig,
};
use crate::rto::{
    BridgeRtoConfig, FixedRtoConfig, Lim2020Config, Lim2024Config, LinkAwareConfig, LwipRtoConfig,
    PerByteRtoConfig, Rfc6298Config, RtoFactory, UipRtoConfig,
};

/// The three kinds of pluggable policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyFamily {
    /// Retransmission timeout ([`crate::rto`], a profile's `rto`).
    Rto,
    /// Congestion control ([`crate::cc`], a profile's `cc`).
    Cc,
    /// When to acknowledge ([`crate::ack`], a profile's `ack`).
    Ack,
}

impl PolicyFamily {
    /// The family's name, which is also the profile field that selects it.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyFamily::Rto => "rto",
            PolicyFamily::Cc => "cc",
            PolicyFamily::Ack => "ack",
        }
    }
}

/// One registered policy, as listed by [`policy_catalog`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyInfo {
    /// Which profile field selects it.
    pub family: PolicyFamily,
    /// The value of `policy` that selects it.
    pub name: &'static str,
    /// The first sentence of the policy module's documentation.
    pub description: String,
    /// Every parameter with its default value, as written in a profile
    /// (durations as strings with a unit).
    pub defaults: serde_json::Value,
    /// What each parameter means: the first sentence of its field's
    /// documentation, for the parameters that have one.
    pub meanings: serde_json::Map<String, serde_json::Value>,
}

/// Sources of configuration types that several policies share (Lim's,
/// which `lim2024` and `link_aware` take too), searched for a parameter's
/// documentation after the policy's own module.
const SHARED_CONFIG_SOURCES: &[&str] = &[include_str!("rto/lim2020.rs")];

impl PolicyInfo {
    fn new<C: Serialize>(
        family: PolicyFamily,
        name: &'static str,
        module_source: &str,
        choice: &C,
    ) -> PolicyInfo {
        let mut defaults = serde_json::to_value(choice).expect("policy configs serialize to JSON");
        if let Some(fields) = defaults.as_object_mut() {
            // The tag selects the policy; it is not a parameter.
            fields.remove("policy");
        }
        let mut meanings = serde_json::Map::new();
        if let Some(fields) = defaults.as_object() {
            for key in fields.keys() {
                let found = std::iter::once(module_source)
                    .chain(SHARED_CONFIG_SOURCES.iter().copied())
                    .find_map(|source| field_summary(source, key));
                if let Some(text) = found {
                    meanings.insert(key.clone(), serde_json::Value::String(text));
                }
            }
        }
        PolicyInfo {
            family,
            name,
            description: module_summary(module_source),
            defaults,
            meanings,
        }
    }
}

/// The first sentence of a module's `//!` documentation, on one line and
/// with rustdoc link brackets removed.
fn module_summary(source: &str) -> String {
    let mut words = Vec::new();
    for line in source.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            break;
        };
        let text = text.trim();
        if text.is_empty() {
            if words.is_empty() {
                continue;
            }
            break;
        }
        words.push(text);
    }
    let paragraph = words.join(" ").replace("[`", "`").replace("`]", "`");
    first_sentence(&paragraph).to_string()
}

/// The first sentence of the `///` documentation of the first struct field
/// called `field` in `source`, on one line and without link brackets.
fn field_summary(source: &str, field: &str) -> Option<String> {
    let mut docs: Vec<&str> = Vec::new();
    let mut in_attribute = false;
    for line in source.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            docs.push(text.trim());
            continue;
        }
        // Attributes between the documentation and the field, some over
        // several lines.
        if in_attribute || line.starts_with("#[") {
            in_attribute = !line.ends_with(']');
            continue;
        }
        let named = line
            .strip_prefix("pub ")
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(name, _)| name.trim() == field);
        if named && !docs.is_empty() {
            let paragraph = docs.join(" ").replace("[`", "`").replace("`]", "`");
            return Some(first_sentence(&paragraph).to_string());
        }
        docs.clear();
    }
    None
}

/// `text` up to the first full stop followed by a space, ignoring those
/// inside parentheses (citations) and after a single letter (initials such
/// as "L. Brakmo").
fn first_sentence(text: &str) -> &str {
    let mut depth = 0usize;
    let mut word_len = 0usize;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '.' if depth == 0 && word_len > 1 && bytes.get(i + 1) == Some(&b' ') => {
                return &text[..=i];
            }
            _ => {}
        }
        word_len = if c == ' ' { 0 } else { word_len + 1 };
    }
    text
}

/// Generates a family's choice enum, `NAMES`, `factory()`, `defaults()` and
/// catalog entries from one line per policy:
/// `module => Variant(Config)`, or `module => Variant(Config) built by F`
/// when the factory is `F(config)` rather than the config itself.
macro_rules! policy_family {
    (
        $(#[$attr:meta])*
        pub enum $choice:ident: $factory:ident, $family:ident, $dir:literal {
            $( $module:ident => $variant:ident($config:ty) $(built by $build:path)? ),+ $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Deserialize, Serialize)]
        #[serde(tag = "policy", rename_all = "snake_case")]
        pub enum $choice {
            $(
                #[doc = concat!("[`crate::", $dir, "::", stringify!($module), "`].")]
                $variant($config),
            )+
        }

        impl $choice {
            /// The registered policies' names, as written in `policy = "..."`.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($module)),+];

            /// The factory for this choice.
            pub fn factory(&self) -> Arc<dyn $factory> {
                match *self {
                    $( $choice::$variant(c) => Arc::new(policy_family!(@build c $($build)?)), )+
                }
            }

            /// Every registered policy with its default configuration, in
            /// the order of [`Self::NAMES`].
            pub fn defaults() -> Vec<$choice> {
                vec![$( $choice::$variant(<$config>::default()) ),+]
            }

            fn catalog() -> Vec<PolicyInfo> {
                vec![$(
                    PolicyInfo::new(
                        PolicyFamily::$family,
                        stringify!($module),
                        include_str!(concat!($dir, "/", stringify!($module), ".rs")),
                        &$choice::$variant(<$config>::default()),
                    )
                ),+]
            }
        }
    };
    (@build $c:ident) => { $c };
    (@build $c:ident $build:path) => { $build($c) };
}

policy_family! {
    /// The RTO policy of a profile.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum RtoChoice: RtoFactory, Rto, "rto" {
        rfc6298 => Rfc6298(Rfc6298Config),
        lwip => Lwip(LwipRtoConfig),
        uip => Uip(UipRtoConfig),
        lim2020 => Lim2020(Lim2020Config),
        lim2024 => Lim2024(Lim2024Config),
        link_aware => LinkAware(LinkAwareConfig),
        bridge => Bridge(BridgeRtoConfig),
        per_byte => PerByte(PerByteRtoConfig),
        fixed => Fixed(FixedRtoConfig),
    }
}

policy_family! {
    /// The congestion control of a profile.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum CcChoice: CcFactory, Cc, "cc" {
        reno => Reno(RenoConfig),
        // NewReno takes Reno's parameters; its factory wraps them.
        newreno => Newreno(RenoConfig) built by NewRenoConfig,
        vegas => Vegas(VegasConfig),
        vegas_ns2 => VegasNs2(VegasNs2Config),
        westwood => Westwood(WestwoodConfig),
        tibet => Tibet(TibetConfig),
        single_segment => SingleSegment(SingleSegmentConfig),
    }
}

policy_family! {
    /// The ACK policy of a profile.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum AckChoice: AckFactory, Ack, "ack" {
        immediate => Immediate(ImmediateAckConfig),
        delayed => Delayed(DelayedAckConfig),
        size_aware => SizeAware(SizeAwareAckConfig),
    }
}

/// Every registered policy of every family, with its description and its
/// parameters' defaults: RTO policies first, then congestion control, then
/// ACK policies, each in registration order.
pub fn policy_catalog() -> Vec<PolicyInfo> {
    let mut all = RtoChoice::catalog();
    all.extend(CcChoice::catalog());
    all.extend(AckChoice::catalog());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `policy` tag each default choice serializes with.
    fn tags<T: Serialize>(choices: &[T]) -> Vec<String> {
        choices
            .iter()
            .map(|c| {
                serde_json::to_value(c).expect("serializes")["policy"]
                    .as_str()
                    .expect("internally tagged")
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn names_are_the_serde_tags() {
        // A variant whose snake_case name differs from its module would be
        // listed under one name and parsed under another.
        assert_eq!(tags(&RtoChoice::defaults()), RtoChoice::NAMES);
        assert_eq!(tags(&CcChoice::defaults()), CcChoice::NAMES);
        assert_eq!(tags(&AckChoice::defaults()), AckChoice::NAMES);
    }

    #[test]
    fn every_default_round_trips_through_toml() {
        for choice in RtoChoice::defaults() {
            let text = toml::to_string(&choice).expect("serializes");
            assert_eq!(toml::from_str::<RtoChoice>(&text), Ok(choice), "{text}");
        }
        for choice in CcChoice::defaults() {
            let text = toml::to_string(&choice).expect("serializes");
            assert_eq!(toml::from_str::<CcChoice>(&text), Ok(choice), "{text}");
        }
        for choice in AckChoice::defaults() {
            let text = toml::to_string(&choice).expect("serializes");
            assert_eq!(toml::from_str::<AckChoice>(&text), Ok(choice), "{text}");
        }
    }

    #[test]
    fn factories_build_the_named_policy() {
        for (choice, name) in RtoChoice::defaults().iter().zip(RtoChoice::NAMES) {
            assert_eq!(choice.factory().name(), *name);
        }
        for (choice, name) in CcChoice::defaults().iter().zip(CcChoice::NAMES) {
            assert_eq!(choice.factory().name(), *name);
        }
        for (choice, name) in AckChoice::defaults().iter().zip(AckChoice::NAMES) {
            assert_eq!(choice.factory().name(), *name);
        }
    }

    #[test]
    fn catalog_lists_every_policy_with_description_and_defaults() {
        let catalog = policy_catalog();
        let names: Vec<_> = catalog.iter().map(|p| p.name).collect();
        let expected: Vec<_> = RtoChoice::NAMES
            .iter()
            .chain(CcChoice::NAMES)
            .chain(AckChoice::NAMES)
            .copied()
            .collect();
        assert_eq!(names, expected);
        for info in &catalog {
            assert!(info.description.len() > 20, "{info:?}");
            assert!(!info.description.contains('\n'), "{info:?}");
            assert!(info.defaults.is_object(), "{info:?}");
            assert!(info.defaults.get("policy").is_none(), "{info:?}");
        }
        let fixed = catalog
            .iter()
            .find(|p| p.family == PolicyFamily::Rto && p.name == "fixed")
            .expect("fixed is registered");
        assert_eq!(fixed.defaults["rto"], "1s");
        assert_eq!(fixed.defaults["backoff"], 2);
        assert_eq!(fixed.defaults["max"], "60s");
        let newreno = catalog
            .iter()
            .find(|p| p.name == "newreno")
            .expect("newreno is registered");
        assert_eq!(newreno.family, PolicyFamily::Cc);
        assert!(newreno
            .description
            .starts_with("NewReno congestion control, RFC 6582"));
    }

    #[test]
    fn the_catalog_says_what_lims_readings_mean() {
        let catalog = policy_catalog();
        for name in ["lim2020", "lim2024"] {
            let lim = catalog.iter().find(|p| p.name == name).expect("registered");
            for key in [
                "initial_mdev",
                "srtt_start",
                "mdev_error",
                "weak_samples",
                "cap_sampled_timer",
                "subtract_compares",
                "subtract_counts_this_retransmission",
                "dither_ends",
            ] {
                let text = lim.meanings[key].as_str().expect("text");
                assert!(
                    text.len() > 20 && !text.contains('\n'),
                    "{name}.{key}: {text}"
                );
            }
            assert!(lim.meanings["weak_samples"]
                .as_str()
                .is_some_and(|t| t.contains("\"at_most_two\"") && t.contains("\"any\"")));
        }
        let fixed = catalog
            .iter()
            .find(|p| p.name == "fixed")
            .expect("registered");
        assert!(fixed.meanings.contains_key("rto"), "{:?}", fixed.meanings);
    }

    #[test]
    fn field_summaries_skip_attributes_and_need_the_exact_name() {
        let source = "struct C {\n    /// The gain. More.\n    #[serde(default)]\n    pub gain: u32,\n    pub gains: u32,\n    /// The loss.\n    #[serde(\n        with = \"x\"\n    )]\n    pub loss: u32,\n}\n";
        assert_eq!(field_summary(source, "gain").as_deref(), Some("The gain."));
        assert_eq!(field_summary(source, "loss").as_deref(), Some("The loss."));
        assert_eq!(field_summary(source, "gains"), None);
        assert_eq!(field_summary(source, "lost"), None);
    }

    #[test]
    fn summaries_take_the_first_doc_sentence_without_link_brackets() {
        let source =
            "//! First line\n//! goes on [`here`]. Not this.\n//!\n//! Nor this.\nuse x;\n";
        assert_eq!(module_summary(source), "First line goes on `here`.");
        assert_eq!(module_summary("use x;\n"), "");
        let cited = "//! Vegas (L. Brakmo, \"A. B\", 1995). More.\n";
        assert_eq!(module_summary(cited), "Vegas (L. Brakmo, \"A. B\", 1995).");
        let initial = "//! Work by J. Smith on timers. More.\n";
        assert_eq!(module_summary(initial), "Work by J. Smith on timers.");
    }
}

//! The catalog of registered kinds: every link model, MAC, app and
//! middlebox a scenario file can name, with the fields of its table.
//!
//! Each registry macro lists its kinds with these types ([`link_catalog`](crate::link::link_catalog),
//! [`mac_catalog`](crate::mac::mac_catalog), [`app_catalog`](crate::app::app_catalog),
//! [`middlebox_catalog`](crate::middlebox::middlebox_catalog)), as the policy
//! catalog does for TCP policies ([`rtolab_tcp::policy_catalog`]);
//! [`kind_catalog`](crate::scenario::kind_catalog), beside the scenario
//! reader that accepts these kinds, gathers them (here it would make the
//! registries and this module import each other):
//!
//! * the kind's description is the documentation of its registration line;
//! * its fields are those its `Raw` struct deserializes (read from serde,
//!   [`struct_fields`]), in the struct's order;
//! * each field's type comes from its Rust type, and its meaning, unit and
//!   default from its `///` documentation in the kind's source file: the
//!   sentences `Unit: ….`, `Default: ….` and `Required….` are the unit,
//!   the default and whether it must be given; the rest is its meaning;
//! * a field that holds a table (or an array of tables) read by a struct
//!   declared in the family's files or in `SHARED_SOURCES` lists that
//!   struct's fields the same way (a link's `ends`, a fading link's
//!   `signal`).
//!
//! Why not a JSON-schema derive (`schemars`): the `Raw` structs hold every
//! field as an `Option` and each kind's `validate` applies the defaults, so
//! a derived schema would call every field optional with no default; the
//! unit types ([`Rate`](crate::config::Rate), [`Duration`](crate::config::Duration))
//! would need hand-written schemas, and every `Raw` struct a derive. The
//! documentation next to each field is where its default is stated, and
//! its tests fail for a field without one.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::struct_fields;

/// One registered kind, as listed by `rtolab list links|macs|apps|middleboxes`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindInfo {
    /// `"link"`, `"mac"`, `"app"` or `"middlebox"`.
    pub family: &'static str,
    /// The `kind` value that selects it.
    pub kind: &'static str,
    /// What it is: the documentation of its registration, on one line.
    pub description: String,
    /// The fields of its table besides the ones every kind of the family
    /// takes (`name`, `kind`, `host`), in the order of its source.
    pub fields: Vec<FieldInfo>,
}

/// One field of a kind's table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldInfo {
    /// The key, as written in a scenario file.
    pub name: String,
    /// Its TOML type: `integer`, `float`, `boolean`, `string`, `table`,
    /// `duration` (a string with a unit, `"5ms"`), `rate` (`"10Mbps"`),
    /// `distance` (`"40m"`), an address, or `array of …`.
    #[serde(rename = "type")]
    pub value_type: String,
    /// The unit of a number, when it has one (`bytes`, `packets`, …).
    pub unit: Option<String>,
    /// Whether a table of this kind must set it.
    pub required: bool,
    /// What leaving it out means, as its documentation says.
    pub default: Option<String>,
    /// What it sets, on one line.
    pub meaning: String,
    /// The keys of a table (or of each table of an array) it holds, when
    /// its struct is one the catalog reads; empty otherwise.
    pub fields: Vec<FieldInfo>,
}

/// The catalog of one registry (links, MACs, apps, middleboxes): a
/// [`KindInfo`] per registered kind, in registration order. Called by each
/// registry's macro with the family's name, its scenario trait and, per
/// kind, the documentation of its registration line and its spec type.
/// A kind's table is looked up in its own file first, then in the
/// family's (a `Raw` struct one kind shares with another).
macro_rules! registry_catalog {
    ($family:literal, $trait:ident, $( [$( $doc:literal ),*] $module:ident :: $spec:ident ),+) => {{
        const SOURCES: &[&str] = &[$( include_str!(concat!(stringify!($module), ".rs")) ),+];
        vec![$(
            $crate::catalog::KindInfo::new::<<$module::$spec as $trait>::Raw>(
                $family,
                <$module::$spec as $trait>::KIND,
                &[$( $doc ),*],
                &[&[include_str!(concat!(stringify!($module), ".rs"))], SOURCES].concat(),
            ),
        )+]
    }};
}
pub(crate) use registry_catalog;

impl KindInfo {
    /// The entry of a kind whose table is read as `R`, which is declared in
    /// one of `sources` (the kind's own file first); `doc` is the
    /// documentation of its registration line.
    pub fn new<R: DeserializeOwned>(
        family: &'static str,
        kind: &'static str,
        doc: &[&str],
        sources: &[&str],
    ) -> KindInfo {
        let raw_name = std::any::type_name::<R>()
            .rsplit("::")
            .next()
            .unwrap_or_default();
        let declared = sources
            .iter()
            .find_map(|source| declared_fields(source, raw_name))
            .unwrap_or_default();
        let fields = struct_fields::<R>()
            .iter()
            .map(|&name| {
                let found = declared.iter().find(|f| f.name == name);
                let rust_type = found.map_or("", |f| f.rust_type.as_str());
                let mut info =
                    FieldInfo::new(name, rust_type, found.map_or("", |f| f.doc.as_str()));
                info.fields = nested_fields(rust_type, sources, 0);
                info
            })
            .collect();
        KindInfo {
            family,
            kind,
            description: one_line(&doc.join(" ")),
            fields,
        }
    }

    /// The same entry with `extra` fields after its own (the `profile` and
    /// `tcp` keys of TCP apps).
    pub fn with_fields(mut self, extra: impl IntoIterator<Item = FieldInfo>) -> KindInfo {
        self.fields.extend(extra);
        self
    }
}

impl FieldInfo {
    /// A field from its key, its Rust type and its documentation.
    pub fn new(name: &str, rust_type: &str, doc: &str) -> FieldInfo {
        let (value_type, type_unit) = toml_type(rust_type);
        let mut info = FieldInfo {
            name: name.to_string(),
            value_type,
            unit: type_unit.map(str::to_string),
            required: false,
            default: None,
            meaning: String::new(),
            fields: Vec::new(),
        };
        let text = one_line(doc);
        let (meaning, tagged) = tagged_parts(&text);
        let mut meaning = meaning.to_string();
        for part in tagged {
            let bare = part.strip_suffix('.').unwrap_or(part);
            if let Some(unit) = bare.strip_prefix("Unit: ") {
                info.unit = Some(unit.to_string());
            } else if let Some(default) = bare.strip_prefix("Default: ") {
                info.default = Some(default.to_string());
            } else {
                info.required = true;
                // "Required for …": the condition is part of the meaning.
                if bare != "Required" {
                    meaning = format!("{meaning} {part}");
                }
            }
        }
        info.meaning = meaning.trim().to_string();
        info
    }
}

/// `text` split into its meaning (the text before the first tag, maybe
/// empty) and its tagged sentences (each opening with `Unit: `,
/// `Default: ` or `Required`, up to the next tag). A tag opens a sentence
/// only after a full stop and a space, so values such as `"0.5s"` stay
/// whole.
fn tagged_parts(text: &str) -> (&str, Vec<&str>) {
    const TAGS: [&str; 3] = ["Unit: ", "Default: ", "Required"];
    let opens_tag = |at: usize| TAGS.iter().any(|t| text[at..].starts_with(t));
    let mut cuts: Vec<usize> = text
        .match_indices(". ")
        .map(|(i, _)| i + 2)
        .filter(|&at| opens_tag(at))
        .collect();
    if opens_tag(0) {
        cuts.insert(0, 0);
    }
    let meaning = text[..cuts.first().copied().unwrap_or(text.len())].trim();
    cuts.push(text.len());
    let tagged = cuts.windows(2).map(|w| text[w[0]..w[1]].trim()).collect();
    (meaning, tagged)
}

/// Files declaring structs that several kinds' tables hold (a link's
/// `ends`, a mobile's `signal`, a middlebox's `match`), searched after the
/// family's own files for the struct of a nested table.
const SHARED_SOURCES: &[&str] = &[
    include_str!("link/ends.rs"),
    include_str!("link/jitter.rs"),
    include_str!("link/signal.rs"),
    include_str!("middlebox/mod.rs"),
    include_str!("radio/mobility.rs"),
];

/// The fields of the table a field of Rust type `rust` holds (through
/// `Option` and `Vec`), when its struct is declared in `sources` or
/// [`SHARED_SOURCES`]; their names are the declared ones (such tables are
/// read by serde with no renaming but the one the parser sees).
fn nested_fields(rust: &str, sources: &[&str], depth: usize) -> Vec<FieldInfo> {
    let mut inner = rust.trim();
    while let Some(rest) = inner
        .strip_prefix("Option<")
        .or_else(|| inner.strip_prefix("Vec<"))
    {
        inner = rest.strip_suffix('>').unwrap_or(rest);
    }
    // Tables nest a few levels at most (a station's mobility's waypoints).
    if depth > 3 || !inner.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Vec::new();
    }
    let Some(declared) = sources
        .iter()
        .chain(SHARED_SOURCES)
        .find_map(|source| declared_fields(source, inner))
    else {
        return Vec::new();
    };
    declared
        .iter()
        .map(|d| {
            let mut info = FieldInfo::new(&d.name, &d.rust_type, &d.doc);
            info.fields = nested_fields(&d.rust_type, sources, depth + 1);
            info
        })
        .collect()
}

/// A field as declared in source: its serde name, Rust type and doc text.
struct Declared {
    name: String,
    rust_type: String,
    doc: String,
}

/// The fields of `struct name { … }` in `source`, with their `///`
/// documentation; `None` when `source` does not declare it.
fn declared_fields(source: &str, name: &str) -> Option<Vec<Declared>> {
    let mut lines = source.lines().skip_while(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "struct");
        !at.is_some_and(|i| {
            words.get(i + 1).map(|w| w.trim_end_matches("{}")) == Some(name)
                && !line.starts_with(' ')
        })
    });
    let head = lines.next()?;
    let mut fields = Vec::new();
    if head.trim_end().ends_with("{}") {
        return Some(fields);
    }
    let mut docs: Vec<&str> = Vec::new();
    let mut rename = None;
    let mut in_attribute = false;
    for line in lines {
        if line.starts_with('}') {
            break;
        }
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            docs.push(text.trim());
            continue;
        }
        if in_attribute || line.starts_with("#[") {
            if let Some((_, after)) = line.split_once("rename = \"") {
                rename = after.split('"').next().map(str::to_string);
            }
            in_attribute = !line.ends_with(']');
            continue;
        }
        let declaration = ["pub(super) ", "pub(crate) ", "pub "]
            .iter()
            .find_map(|v| line.strip_prefix(v))
            .unwrap_or(line);
        if let Some((field, rust_type)) = declaration.split_once(':') {
            fields.push(Declared {
                name: rename.take().unwrap_or_else(|| field.trim().to_string()),
                rust_type: rust_type.trim().trim_end_matches(',').to_string(),
                doc: docs.join(" "),
            });
        }
        docs.clear();
    }
    Some(fields)
}

/// The TOML type of a field of Rust type `rust` (`Option` removed), and
/// the unit its type carries.
fn toml_type(rust: &str) -> (String, Option<&'static str>) {
    let rust = rust.trim();
    if let Some(inner) = rust
        .strip_prefix("Option<")
        .and_then(|r| r.strip_suffix('>'))
    {
        return toml_type(inner);
    }
    if let Some(inner) = rust.strip_prefix("Vec<").and_then(|r| r.strip_suffix('>')) {
        let (inner, unit) = toml_type(inner);
        return (format!("array of {inner}"), unit);
    }
    let named = match rust {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i64" => "integer",
        "f64" => "float",
        "bool" => "boolean",
        "String" => "string",
        "Duration" => "duration",
        "Rate" => return ("rate".into(), Some("bit/s")),
        "Distance" => return ("distance".into(), Some("m")),
        "SocketAddr" => "address:port",
        "Ipv4Addr" => "IPv4 address",
        "Ipv4Cidr" => "IPv4 address/prefix",
        "Ipv6Cidr" => "IPv6 address/prefix",
        "Position" => "position",
        "toml::Value" => "value",
        "" => "",
        _ => "table",
    };
    (named.to_string(), None)
}

/// `text` with its whitespace runs as single spaces and rustdoc link
/// brackets removed (`` [`P2pLink`] `` reads as `` `P2pLink` ``).
fn one_line(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.join(" ").replace("[`", "`").replace("`]", "`")
}

/// The keys every TCP app takes besides its own (none for other apps).
pub fn tcp_app_fields(tcp: bool) -> Vec<FieldInfo> {
    if !tcp {
        return Vec::new();
    }
    vec![
        FieldInfo::new(
            "profile",
            "String",
            "The named TCP profile its connections start from, as a host's `profile`. \
             Default: the host's TCP settings.",
        ),
        FieldInfo::new(
            "tcp",
            "toml::Table",
            "Profile settings overridden for this app's connections, merged onto the \
             profile (`rtolab list policies` lists the `rto`, `cc` and `ack` policies). \
             Default: none.",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::kind_catalog;

    #[test]
    fn every_kind_is_described_and_every_field_documented() {
        let catalog = kind_catalog();
        for (family, kinds) in [
            ("link", crate::link::LINK_KINDS),
            ("mac", crate::mac::MAC_KINDS),
            ("app", crate::app::APP_KINDS),
            ("middlebox", crate::middlebox::MIDDLEBOX_KINDS),
        ] {
            let listed: Vec<_> = catalog
                .iter()
                .filter(|k| k.family == family)
                .map(|k| k.kind)
                .collect();
            assert_eq!(listed, kinds, "{family}");
        }
        let mut missing = Vec::new();
        for info in &catalog {
            if info.description.len() < 10 {
                missing.push(format!("{} {}: no description", info.family, info.kind));
            }
            let mut fields: Vec<(String, &FieldInfo)> =
                info.fields.iter().map(|f| (f.name.clone(), f)).collect();
            while let Some((path, field)) = fields.pop() {
                fields.extend(
                    field
                        .fields
                        .iter()
                        .map(|f| (format!("{path}.{}", f.name), f)),
                );
                let at = format!("{} {}.{path}", info.family, info.kind);
                if field.value_type.is_empty() {
                    missing.push(format!("{at}: not found in its Raw struct's source"));
                }
                if field.meaning.is_empty() {
                    missing.push(format!("{at}: no documentation of its meaning"));
                }
                if field.required == field.default.is_some() {
                    missing.push(format!(
                        "{at}: its documentation says neither `Required.` nor `Default: ….` \
                         (or both)"
                    ));
                }
            }
        }
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn fields_read_type_unit_default_and_meaning() {
        let catalog = kind_catalog();
        let p2p = catalog
            .iter()
            .find(|k| k.family == "link" && k.kind == "point-to-point")
            .expect("point-to-point is registered");
        let names: Vec<_> = p2p.fields.iter().map(|f| f.name.as_str()).collect();
        // In the struct's order, under their scenario keys.
        assert_eq!(names[..3], ["ends", "rate", "delay"]);
        assert!(names.contains(&"queue") && names.contains(&"loss"));
        let field = |name: &str| p2p.fields.iter().find(|f| f.name == name).expect("listed");
        let rate = field("rate");
        assert_eq!(
            (
                rate.value_type.as_str(),
                rate.unit.as_deref(),
                rate.required
            ),
            ("rate", Some("bit/s"), true)
        );
        let queue = field("queue");
        assert_eq!(queue.value_type, "integer");
        assert_eq!(queue.unit.as_deref(), Some("packets"));
        assert!(queue.default.is_some() && !queue.required);
        // The keys of a table a field holds are listed under it.
        let ends = field("ends");
        assert!(ends
            .fields
            .iter()
            .any(|f| f.name == "host" && f.required && f.meaning == "Host name."));
        // A renamed field is listed under the key a scenario writes.
        let drop_list = catalog
            .iter()
            .find(|k| k.kind == "drop-list")
            .expect("drop-list is registered");
        assert!(drop_list.fields.iter().any(|f| f.name == "match"));
    }

    #[test]
    fn declared_fields_skip_attributes_and_other_structs() {
        let source = "struct RawA {\n    /// The gain. Unit: dB. Default: 3.\n    #[serde(\n        rename = \"g\"\n    )]\n    gain: Option<f64>,\n    pub(super) ends: Option<Vec<RawEnd>>,\n}\n\npub struct A {\n    /// Other.\n    gain: f64,\n}\n";
        let fields = declared_fields(source, "RawA").expect("declared");
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0].name, "g");
        assert_eq!(fields[0].rust_type, "Option<f64>");
        let gain = FieldInfo::new("g", &fields[0].rust_type, &fields[0].doc);
        assert_eq!(gain.meaning, "The gain.");
        assert_eq!(gain.unit.as_deref(), Some("dB"));
        assert_eq!(gain.default.as_deref(), Some("3"));
        assert_eq!(fields[1].doc, "");
        assert_eq!(toml_type(&fields[1].rust_type).0, "array of table");
        assert!(declared_fields(source, "RawB").is_none());
        assert_eq!(
            declared_fields("pub struct RawE {}\n", "RawE").map(|f| f.len()),
            Some(0)
        );
    }
}

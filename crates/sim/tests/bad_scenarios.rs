//! Bad scenario files are rejected with one line naming the field.

use rtolab_sim::{Scenario, ScenarioError};

/// A valid two-host scenario; tests break one thing at a time.
const GOOD: &str = r#"
name = "t"
duration = "1s"

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [
  { host = "a", address = "10.0.0.1/24" },
  { host = "b", address = "10.0.0.2/24" },
]
rate = "10Mbps"
delay = "5ms"

[[route]]
host = "a"
destination = "default"
via = "10.0.0.2"

[[app]]
kind = "sink"
host = "b"
port = 9000

[[app]]
kind = "cbr"
host = "a"
destination = "10.0.0.2:9000"
size = 100
rate = "1Mbps"
"#;

#[track_caller]
fn rejects(text: &str) -> ScenarioError {
    match Scenario::from_toml_str(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            let line = e.to_string();
            assert!(!line.contains('\n'), "not one line: {line:?}");
            assert_eq!(line, format!("{}: {}", e.path, e.message));
            e
        }
    }
}

#[track_caller]
fn broken(from: &str, to: &str) -> ScenarioError {
    assert!(GOOD.contains(from), "{from:?} not in the template");
    rejects(&GOOD.replacen(from, to, 1))
}

#[test]
fn the_template_is_valid() {
    let s = Scenario::from_toml_str(GOOD).unwrap();
    assert_eq!(s.seed, 1);
    assert_eq!(s.apps[1].name, "cbr1");
    let summary = serde_json::to_value(s.summary()).unwrap();
    assert_eq!(
        summary,
        serde_json::json!({"name": "t", "seed": 1, "duration_s": 1.0, "hosts": 2,
            "links": 1, "routes": 1, "captures": 0, "apps": 2})
    );
}

#[test]
fn unknown_key_names_the_key() {
    let e = broken("name = \"a\"", "nmae = \"a\"");
    assert_eq!(e.path, "host[0].nmae");
    assert!(e.message.starts_with("unknown field"), "{e}");
    let e = broken("delay = \"5ms\"", "delay = \"5ms\"\njitter = \"1ms\"");
    assert_eq!(e.path, "link[0].jitter");
    let e = broken("name = \"t\"", "name = \"t\"\ncolour = \"red\"");
    assert_eq!(e.path, "colour");
}

#[test]
fn wrong_type_names_the_field() {
    let e = broken("rate = \"10Mbps\"", "rate = 10");
    assert_eq!(e.path, "link[0].rate");
    assert!(e.message.contains("invalid type"), "{e}");
    let e = broken("port = 9000", "port = \"nine thousand\"");
    assert_eq!(e.path, "app[0].port");
    let e = broken("size = 100", "size = -1");
    assert_eq!(e.path, "app[1].size");
}

#[test]
fn negative_rate_is_rejected() {
    let e = broken("rate = \"10Mbps\"", "rate = \"-5Mbps\"");
    assert_eq!(
        e.to_string(),
        "link[0].rate: must be positive, got \"-5Mbps\""
    );
    let e = broken("rate = \"1Mbps\"", "rate = \"0kbps\"");
    assert_eq!(e.path, "app[1].rate");
}

#[test]
fn route_to_missing_host_is_rejected() {
    let e = broken("host = \"a\"\ndestination", "host = \"ghost\"\ndestination");
    assert_eq!(e.to_string(), "route[0].host: no host named \"ghost\"");
}

#[test]
fn missing_field_names_the_field() {
    let e = broken("duration = \"1s\"\n", "");
    assert_eq!(e.to_string(), "duration: missing field");
    let e = broken(
        "  { host = \"a\", address = \"10.0.0.1/24\" },",
        "  { host = \"a\" },",
    );
    assert_eq!(e.path, "link[0].ends[0].address");
    let e = broken("delay = \"5ms\"\n", "");
    assert_eq!(
        e.to_string(),
        "link[0].delay: required for point-to-point links"
    );
}

#[test]
fn out_of_range_values_are_rejected() {
    let e = broken("delay = \"5ms\"", "delay = \"5ms\"\nloss = 1.5");
    assert_eq!(
        e.to_string(),
        "link[0].loss: must be between 0 and 1, got 1.5"
    );
    let e = broken("delay = \"5ms\"", "delay = \"-5ms\"");
    assert_eq!(e.path, "link[0].delay");
    let e = broken("duration = \"1s\"", "duration = \"0s\"");
    assert_eq!(e.to_string(), "duration: must be positive");
    let e = broken("size = 100", "size = 8");
    assert_eq!(e.path, "app[1].size");
    let e = broken("\"10.0.0.1/24\"", "\"10.0.0.1/40\"");
    assert_eq!(e.path, "link[0].ends[0].address");
    let e = broken("kind = \"point-to-point\"", "kind = \"ethernet\"");
    assert_eq!(e.path, "link[0].kind");
    let e = broken("rate = \"10Mbps\"", "rate = \"10 parsecs\"");
    assert!(e.message.contains("unknown rate unit"), "{e}");
}

#[test]
fn references_must_resolve() {
    let e = broken("name = \"b\"", "name = \"a\"");
    assert_eq!(e.path, "host[1].name");
    assert!(e.message.contains("duplicate host name"), "{e}");
    let e = broken("via = \"10.0.0.2\"", "via = \"10.0.0.9\"");
    assert_eq!(e.path, "route[0].via");
    let e = broken("via = \"10.0.0.2\"", "via = \"192.168.1.1\"");
    assert_eq!(
        e.to_string(),
        "route[0].via: 192.168.1.1 is not on a subnet of host \"a\""
    );
    let e = broken(
        "destination = \"10.0.0.2:9000\"",
        "destination = \"10.0.9.9:9000\"",
    );
    assert_eq!(
        e.to_string(),
        "app[1].destination: no interface has address 10.0.9.9"
    );
    let e = broken(
        "host = \"b\", address = \"10.0.0.2/24\"",
        "host = \"b\", address = \"10.0.0.1/24\"",
    );
    assert_eq!(e.path, "link[0].ends[1].address");
    let e = broken("host = \"b\"\nport", "host = \"nowhere\"\nport");
    assert_eq!(e.to_string(), "app[0].host: no host named \"nowhere\"");
    let e = rejects(&format!(
        "{GOOD}\n[[capture]]\nhost = \"a\"\nlink = \"cd\"\nfile = \"x.pcap\"\n"
    ));
    assert_eq!(e.to_string(), "capture[0].link: no link named \"cd\"");
    let e = rejects(&format!(
        "{GOOD}\n[[capture]]\nhost = \"a\"\nlink = \"ab\"\nfile = \"../x.pcap\"\n"
    ));
    assert_eq!(e.path, "capture[0].file");
}

#[test]
fn fields_of_another_kind_are_rejected() {
    let e = broken("delay = \"5ms\"", "delay = \"5ms\"\ntx_range = 10.0");
    assert_eq!(
        e.to_string(),
        "link[0].tx_range: not allowed for point-to-point links"
    );
    let e = broken("port = 9000", "port = 9000\nrate = \"1Mbps\"");
    assert_eq!(e.to_string(), "app[0].rate: not allowed for sink apps");
}

#[test]
fn syntax_errors_give_a_position() {
    let e = rejects("name = \"t\"\nduration = \n");
    assert!(e.path.starts_with("line 2"), "{e}");
}

#[test]
fn missing_files_name_the_path() {
    let e = Scenario::from_path(std::path::Path::new("no/such/scenario.toml")).unwrap_err();
    assert_eq!(e.path, "no/such/scenario.toml");
}

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
    let e = broken("delay = \"5ms\"", "delay = \"5ms\"\nwobble = \"1ms\"");
    assert_eq!(e.path, "link[0].wobble");
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

/// A scenario with one capture on link ab writing `file` (a TOML basic string).
fn with_capture_file(file: &str) -> String {
    format!("{GOOD}\n[[capture]]\nhost = \"a\"\nlink = \"ab\"\nfile = \"{file}\"\n")
}

#[test]
fn capture_file_names_that_no_file_system_takes_are_rejected() {
    let long = "x".repeat(300);
    for (file, needle) in [
        ("a\\u0000b.pcap", "control characters"),
        ("tab\\there.pcap", "control characters"),
        ("bell\\u0007.pcap", "control characters"),
        (long.as_str(), "at most 255 bytes"),
        ("...", "only dots and spaces"),
        (" . ", "only dots and spaces"),
        ("", "only dots and spaces"),
        ("sub\\\\x.pcap", "without /"),
        ("metrics.json", "the run writes them"),
        ("scenario.toml", "the run writes them"),
        ("metrics.parquet", "the run writes them"),
        ("report.html", "the run writes them"),
        ("plots", "the run writes them"),
        ("traces", "the run writes them"),
    ] {
        let e = rejects(&with_capture_file(file));
        assert_eq!(e.path, "capture[0].file", "{file:?}");
        assert!(e.message.contains(needle), "{file:?}: {}", e.message);
        // Even a huge name gives a short line.
        assert!(e.message.len() < 200, "{}", e.message);
    }
    // 255 bytes of multi-byte characters is the limit, not 255 characters.
    let wide = "é".repeat(128);
    let e = rejects(&with_capture_file(&wide));
    assert!(e.message.contains("has 256)"), "{}", e.message);
    let longest = "é".repeat(127);
    for file in ["a.pcap", ".hidden.pcap", "x y.pcap", longest.as_str()] {
        let text = with_capture_file(file);
        assert!(Scenario::from_toml_str(&text).is_ok(), "{file:?} rejected");
    }
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

/// The template plus a TCP transfer from `a` to `b`; `app` is appended to
/// the bulk sender's table, `host` to host `a`'s.
fn with_tcp(host: &str, app: &str) -> String {
    let text = GOOD.replacen("name = \"a\"\n", &format!("name = \"a\"\n{host}\n"), 1);
    format!(
        "{text}
[[app]]
kind = \"tcp-sink\"
host = \"b\"
port = 5001

[[app]]
kind = \"tcp-bulk\"
host = \"a\"
peer = \"10.0.0.2:5001\"
bytes = 1000
{app}
"
    )
}

#[test]
fn tcp_template_is_valid() {
    let s = Scenario::from_toml_str(&with_tcp("", "")).unwrap();
    // Without a profile anywhere, TCP apps run the Linux-like one.
    assert_eq!(s.apps[3].tcp.as_ref().unwrap().name, "linux");
    assert!(s.apps[0].tcp.is_none(), "UDP apps have no TCP profile");
}

#[test]
fn tcp_overrides_merge_onto_the_named_profile() {
    use rtolab_tcp::profile::{CcChoice, RtoChoice};
    let s = Scenario::from_toml_str(&with_tcp(
        "profile = \"lwip\"\n[host.tcp]\nsend_buffer = 8192",
        "[app.tcp]\nmss = 536\n[app.tcp.rto]\ninitial = \"3s\"\n\
         [app.tcp.cc.initial_window]\nsegments = 2",
    ))
    .unwrap();
    let host = s.hosts[0].tcp.as_ref().unwrap();
    assert_eq!((host.name.as_str(), host.send_buffer), ("lwip", 8192));
    let p = s.apps[3].tcp.as_ref().unwrap();
    // Inherited from the host: its profile and its override.
    assert_eq!(p.send_buffer, 8192);
    assert_eq!(p.recv_buffer, rtolab_tcp::Profile::lwip().recv_buffer);
    assert_eq!(p.mss, 536);
    let RtoChoice::Lwip(rto) = p.rto else {
        panic!("{:?}", p.rto)
    };
    // One field of the policy changed, the other kept.
    assert_eq!(rto.initial, rtolab_sim::SimDuration::from_secs(3));
    assert_eq!(rto.slow_interval, rtolab_sim::SimDuration::from_millis(500));
    let CcChoice::Reno(reno) = p.cc else {
        panic!("{:?}", p.cc)
    };
    assert_eq!(reno.initial_window.bytes(1000), 2000);
    assert_eq!(reno.max_window, Some(8096), "the rest of cc is lwIP's");

    // Naming another policy replaces the table instead of merging into it.
    let s = Scenario::from_toml_str(&with_tcp(
        "",
        "profile = \"lwip\"\n[app.tcp.rto]\npolicy = \"rfc6298\"\nmin = \"1s\"",
    ))
    .unwrap();
    let p = s.apps[3].tcp.as_ref().unwrap();
    assert!(
        matches!(p.rto, RtoChoice::Rfc6298(c) if c.min == rtolab_sim::SimDuration::from_secs(1)),
        "{:?}",
        p.rto
    );
}

#[test]
fn bad_tcp_settings_name_their_field() {
    let e = rejects(&with_tcp("", "[app.tcp]\ninitial_rto = \"1s\""));
    assert_eq!(e.path, "app[3].tcp.initial_rto");
    assert!(
        e.message.starts_with("unknown field (expected one of"),
        "{e}"
    );
    let e = rejects(&with_tcp(
        "",
        "profile = \"lwip\"\n[app.tcp.rto]\nbogus = 1",
    ));
    assert_eq!(e.path, "app[3].tcp.rto.bogus");
    // A policy's table is read as a whole; its bad field is still named.
    let e = rejects(&with_tcp("[host.tcp]\nrto = { min = 200 }", ""));
    assert_eq!(e.path, "host[0].tcp.rto.min", "{e}");
    assert!(e.message.contains("200"), "{e}");
    let e = rejects(&with_tcp(
        "",
        "[app.tcp.rto]\npolicy = \"lim2020\"\ninitial = 3",
    ));
    assert_eq!(e.path, "app[3].tcp.rto.initial", "{e}");
    let e = rejects(&with_tcp("", "[app.tcp]\nmss = \"big\""));
    assert_eq!(e.path, "app[3].tcp.mss");
    let e = rejects(&with_tcp("", "[app.tcp.cc]\npolicy = \"cubic\""));
    assert_eq!(e.path, "app[3].tcp.cc.policy");
    let e = rejects(&with_tcp("[host.tcp]\nnagle = 3", ""));
    assert_eq!(e.path, "host[0].tcp.nagle");
    let e = rejects(&with_tcp("", "profile = \"bsd\""));
    assert_eq!(
        e.to_string(),
        "app[3].profile: unknown profile \"bsd\" (expected one of lwip, uip, linux, rfc, ns2)"
    );
    let e = rejects(&with_tcp("profile = \"win\"", ""));
    assert_eq!(e.path, "host[0].profile");
}

#[test]
fn tcp_apps_are_checked() {
    let e = rejects(&with_tcp("", "").replace("port = 5001", "port = 5002"));
    assert_eq!(
        e.to_string(),
        "app[3].peer: no tcp-sink app listens on port 5001 of host \"b\""
    );
    let e = rejects(&with_tcp("", "").replace("10.0.0.2:5001", "10.0.9.9:5001"));
    assert_eq!(
        e.to_string(),
        "app[3].peer: no interface has address 10.0.9.9"
    );
    let e = rejects(&with_tcp("", "").replace("bytes = 1000", "bytes = 0"));
    assert_eq!(e.to_string(), "app[3].bytes: must be positive");
    let e = rejects(&with_tcp("", "size = 10"));
    assert_eq!(e.to_string(), "app[3].size: not allowed for tcp-bulk apps");
    let e = broken("port = 9000", "port = 9000\nprofile = \"lwip\"");
    assert_eq!(e.to_string(), "app[0].profile: not allowed for sink apps");
    let e = rejects(&format!(
        "{}\n[[app]]\nkind = \"exchange-server\"\nhost = \"b\"\nport = 5001\n",
        with_tcp("", "")
    ));
    assert_eq!(
        e.to_string(),
        "app[4].port: TCP port 5001 on host \"b\" is already used by app[2]"
    );
    let exchange = |fields: &str| {
        format!(
            "{}\n[[app]]\nkind = \"exchange-server\"\nhost = \"b\"\nport = 80\n\
             [[app]]\nkind = \"exchange\"\nhost = \"a\"\npeer = \"10.0.0.2:80\"\n{fields}\n",
            with_tcp("", "")
        )
    };
    assert!(Scenario::from_toml_str(&exchange("request = 8\nresponse = 1")).is_ok());
    let e = rejects(&exchange("request = 7\nresponse = 1"));
    assert_eq!(e.path, "app[5].request");
    let e = rejects(&exchange("request = 100"));
    assert_eq!(e.to_string(), "app[5].response: required for exchange apps");
    let e = rejects(&exchange("request = 100\nresponse = 10\ncount = 0"));
    assert_eq!(e.to_string(), "app[5].count: must be positive");
    let series = with_tcp("", "")
        .replace("kind = \"tcp-bulk\"", "kind = \"message-series\"")
        .replace("bytes = 1000", "sizes = [10, 0]\ngaps = [\"1s\"]");
    let e = rejects(&series);
    assert_eq!(e.to_string(), "app[3].sizes[1]: must be positive");
    let e = rejects(&series.replace("sizes = [10, 0]", "sizes = []"));
    assert_eq!(e.to_string(), "app[3].sizes: must not be empty");
}

/// Link settings that cannot work, one link kind at a time, each refused in
/// one line naming the field and what it allows. The templates are shipped
/// scenarios; each case changes one setting of one link.
#[test]
fn link_settings_that_cannot_work_are_refused_with_the_field_and_range() {
    let p2p = include_str!("../../../scenarios/p2p-bulk.toml");
    let bursty = include_str!("../../../scenarios/bursty-loss.toml");
    let air = include_str!("../../../scenarios/hidden-terminal.toml");
    let wifi = include_str!("../../../scenarios/wifi-timelost.toml");
    let wifi_mac = r#"mac = { data_rate = "11Mbps", basic_rate = "1Mbps", queue = 50 }"#;
    let bridge = include_str!("../../../scenarios/bridge.toml");
    let nfc = "kind = \"nfc\"\nrate = \"11.2kbps\"";
    let mesh = include_str!("../../../scenarios/mesh-uip.toml");
    let mesh_root = "root = \"n1\"";
    let slip = "kind = \"slip\"";
    // The emulator's base-station scenario, its Linux hosts made simulated.
    let fading =
        include_str!("../../../scenarios/emu-ack-holding.toml").replace("stack = \"linux\"\n", "");
    let radio = "outages = [ { start = \"10s\", duration = \"10s\" } ]";
    let cases: &[(&str, &str, &str, &str)] = &[
        (p2p, "rate = \"10Mbps\"", "rate = \"0bps\"", "link[0].rate: must be positive"),
        (p2p, "loss = 0.02", "loss = nan", "link[0].loss: must be between 0 and 1, got NaN"),
        (p2p, "loss = 0.02", "loss = -0.5", "link[0].loss: must be between 0 and 1"),
        (p2p, "delay = \"10ms\"", "delay = \"100000000000s\"", "link[0].delay: too large"),
        (p2p, "loss = 0.02", "jitter = { distribution = \"normal\", mean = \"5ms\" }",
            "link[0].jitter.distribution: must be \"uniform\" or \"exponential\", got \"normal\""),
        (p2p, "loss = 0.02", "jitter = { mean = \"5ms\" }",
            "link[0].jitter.distribution: required"),
        (p2p, "loss = 0.02", "jitter = { distribution = \"exponential\" }",
            "link[0].jitter.mean: required for distribution \"exponential\""),
        (p2p, "kind = \"point-to-point\"", "kind = \"half-duplex\"\njitter = { distribution = \"uniform\", max = \"5ms\" }",
            "link[0].jitter: only a point-to-point link takes jitter"),
        (p2p, "loss = 0.02", "jitter = { distribution = \"uniform\", max = \"5ms\", mean = \"1ms\" }",
            "link[0].jitter.mean: a uniform jitter takes no mean"),
        (p2p, "loss = 0.02", "jitter = { distribution = \"exponential\", mean = \"7200s\" }",
            "link[0].jitter.mean: must be at most 3600s"),
        (p2p, "loss = 0.02", "jitter = { distribution = \"uniform\", max = \"-5ms\" }",
            "link[0].jitter.max"),
        (p2p, "loss = 0.02", "jitter = { distribution = \"uniform\", width = \"5ms\" }",
            "link[0].jitter.width: unknown field"),
        (bursty, "p_good_to_bad = 0.01", "p_good_to_bad = 1.5",
            "link[0].p_good_to_bad: must be a probability between 0 and 1, got 1.5"),
        (bursty, "loss_bad = 0.75", "loss_bad = nan", "link[0].loss_bad: must be a probability"),
        (air, "tx_range = 50.0", "tx_range = 0.0", "link[0].tx_range: must be a positive distance"),
        (air, "tx_range = 50.0", "tx_range = inf", "link[0].tx_range: must be a positive distance"),
        (air, "interference_range = 60.0", "interference_range = 60.0\nmac = { kind = \"csma-ca\", min_be = 9, max_be = 5 }",
            "link[0].mac.min_be: must be at most max_be (5), got 9"),
        (air, "interference_range = 60.0", "interference_range = 60.0\nmac = { kind = \"csma-ca\", unit_backoff = \"0s\" }",
            "link[0].mac.unit_backoff: must be positive"),
        (wifi, wifi_mac, "mac = { data_rate = \"3Mbps\" }",
            "link[1].mac.data_rate: must be an 802.11b rate (1, 2, 5.5 or 11 Mbps)"),
        (wifi, wifi_mac, "mac = { queue = 0 }", "link[1].mac.queue: must be at least 1"),
        (wifi, wifi_mac, "mac = { slot = \"0s\" }", "link[1].mac.slot: must be positive"),
        (wifi, wifi_mac, "mac = { cw_min = 1023, cw_max = 31 }",
            "link[1].mac.cw_max: must be one less than a power of two and at least cw_min (1023)"),
        (wifi, wifi_mac, "mac = { short_retry_limit = 0 }",
            "link[1].mac.short_retry_limit: must be between 1 and 255"),
        (wifi, wifi_mac, "radio = { propagation = { kind = \"shadowing\", path_loss_exponent = 0.0 } }",
            "link[1].radio.propagation.path_loss_exponent: must be positive"),
        (wifi, wifi_mac, "radio = { propagation = { kind = \"shadowing\", rx_threshold_w = 0.0 } }",
            "link[1].radio.propagation.rx_threshold_w: must be positive"),
        (wifi, wifi_mac, "radio = { propagation = { kind = \"shadowing\", cs_threshold_w = 1.0 } }",
            "link[1].radio.propagation.cs_threshold_w: must be at most rx_threshold_w"),
        (wifi, wifi_mac, "radio = { propagation = { kind = \"unit-disk\", tx_range = 50.0, interference_range = 10.0 } }",
            "link[1].radio.propagation.interference_range: must be at least tx_range (50)"),
        (wifi, "{ at = \"150s\", x = 550.0", "{ at = \"0s\", x = 550.0",
            "link[1].stations[0].mobility.waypoints[1].at: must be later than the previous waypoint's"),
        (wifi, "{ at = \"0s\", x = 5.0", "{ at = \"0s\", x = nan",
            "link[1].stations[0].mobility.waypoints[0]: coordinates must be finite numbers"),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"12kbps\"",
            "link[0].rate: an nfc link runs at \"11.2kbps\" or \"24kbps\""),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\nmcu_buffer = 0",
            "link[0].mcu_buffer: must be at least 1 byte"),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\nuart_baud = 0",
            "link[0].uart_baud: must be between 1200 and 100000000 baud"),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\nslot_phase = \"10ms\"",
            "link[0].slot_phase: must be below the slot period (10ms), got \"10ms\""),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\npower_control = { bytes = 0 }",
            "link[0].power_control.bytes: must be at least 1 byte"),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\npower_control = { period = \"20ms\" }",
            "link[0].power_control.period: must leave packets a slot between exchanges: at least 30ms for 2 slots of power control, got \"20ms\""),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\npower_control = { period = \"100ms\", bytes = 50 }",
            "link[0].power_control.period: must leave packets a slot between exchanges: at least 110ms for 10 slots"),
        (bridge, nfc, "kind = \"nfc\"\nrate = \"11.2kbps\"\npower_control = { every = \"1s\" }",
            "link[0].power_control.every: unknown field"),
        (mesh, mesh_root, "root = \"n1\"\nmac = { rdc = { kind = \"contikimac\", check_rate_hz = 0 } }",
            "link[0].mac.rdc.check_rate_hz: must be a power of two from 1 to 128, got 0"),
        (mesh, mesh_root, "root = \"n1\"\nmac = { csma = { neighbor_queues = 0 } }",
            "link[0].mac.csma.neighbor_queues: must be at least 1"),
        (mesh, mesh_root, "root = \"n1\"\nrpl = { lifetime_unit = 0 }",
            "link[0].rpl.lifetime_unit: must be positive"),
        (mesh, mesh_root, "root = \"n1\"\nrpl = { dis_interval = \"0s\" }",
            "link[0].rpl.dis_interval: must be a whole number of seconds from 1s to 65535s"),
        (mesh, "prefix = \"fd00::/64\"", "prefix = \"fd00::/0\"",
            "link[0].prefix: must be a unicast prefix of 1 to 64 bits"),
        (mesh, slip, "kind = \"slip\"\nbaud = 0",
            "link[1].baud: must be between 1 and 12000000 line bits per second"),
        (mesh, slip, "kind = \"slip\"\nbits_per_byte = 7",
            "link[1].bits_per_byte: must be between 8 and 12"),
        (&fading, radio, "outages = [ { start = \"10s\", duration = \"0s\" } ]",
            "link[1].outages[0].duration: must be positive"),
        (&fading, radio, "outages = [ { start = \"1s\", duration = \"1s\" }, { start = \"1s\", duration = \"1s\" } ]",
            "link[1].outages[1].start: must not be before the end of the previous outage"),
        (&fading, radio, "outages = []\nduration_error = -1.0",
            "link[1].duration_error: must be a number above -1"),
        (&fading, radio, "outages = []\nduration_spread = 1.5",
            "link[1].duration_spread: must be at least 0 and below 1"),
    ];
    for (template, from, to, expected) in cases {
        Scenario::from_toml_str(template).unwrap_or_else(|e| panic!("template refused: {e}"));
        assert!(template.contains(from), "{from:?} not in its template");
        let e = rejects(&template.replacen(from, to, 1));
        assert!(
            e.to_string().starts_with(expected),
            "{to:?}: got {e}, expected {expected}"
        );
    }
}

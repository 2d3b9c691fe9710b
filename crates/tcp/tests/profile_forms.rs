//! The serialized form of every built-in profile is part of the interface:
//! scenario overrides are merged onto it and run metrics record it, so a
//! refactor of the policy types must leave it byte-identical.

use rtolab_tcp::Profile;

/// Every built-in profile as TOML and as JSON, one section per profile.
fn current_forms() -> String {
    let mut out = String::new();
    for name in Profile::NAMES {
        let profile = Profile::named(name).expect("a listed profile exists");
        out.push_str(&format!("### {name} toml\n"));
        out.push_str(&toml::to_string(&profile).expect("serialises to TOML"));
        out.push_str(&format!("### {name} json\n"));
        out.push_str(&serde_json::to_string(&profile).expect("serialises to JSON"));
        out.push('\n');
    }
    out
}

#[test]
fn built_in_profiles_serialize_exactly_as_before() {
    let expected = include_str!("fixtures/profiles.txt");
    let current = current_forms();
    if current != expected {
        // Print the new form so an intended change can be reviewed and the
        // fixture replaced deliberately.
        println!("{current}");
    }
    assert_eq!(current, expected);
}

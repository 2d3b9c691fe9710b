//! Runs a scenario file and prints its report as JSON: `cargo run
//! --example run_scenario -- SCENARIO.toml [OUT_DIR]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: run_scenario SCENARIO.toml [OUT_DIR]");
        std::process::exit(2);
    };
    let scenario = match rtolab_sim::Scenario::from_path(std::path::Path::new(&path)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let out_dir = args.next().map(std::path::PathBuf::from);
    let opts = rtolab_sim::RunOptions {
        write_traces: out_dir.is_some(),
        out_dir,
        ..Default::default()
    };
    match rtolab_sim::run_scenario(&scenario, &opts) {
        Ok(report) => println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

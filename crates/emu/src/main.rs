//! `rtolab-emu`: runs a scenario's links in real time between network
//! namespaces (see [`rtolab_emu::cli`]; `rtolab emulate` runs the same).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(rtolab_emu::cli::main(
        "rtolab-emu",
        std::env::args_os().skip(1),
    ))
}

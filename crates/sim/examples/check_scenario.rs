//! Loads scenario files and prints the first error of each, or "ok".
fn main() {
    for path in std::env::args().skip(1) {
        match rtolab_sim::Scenario::from_path(std::path::Path::new(&path)) {
            Ok(_) => println!("{path}: ok"),
            Err(e) => println!("{e}"),
        }
    }
}

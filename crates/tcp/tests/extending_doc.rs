//! The walkthrough in docs/extending.md shows code copied from the source;
//! every ```rust block marked `<!-- excerpt: PATH -->` must still appear
//! verbatim in that file, so the document cannot drift from the code.

use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `(path, code)` of each marked block, in document order.
fn excerpts(doc: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .trim()
            .strip_prefix("<!-- excerpt:")
            .and_then(|rest| rest.strip_suffix("-->"))
        else {
            continue;
        };
        assert_eq!(
            lines.next().map(str::trim),
            Some("```rust"),
            "the excerpt marker for {path} must be followed by a rust block"
        );
        let mut code = String::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            code.push_str(line);
            code.push('\n');
        }
        found.push((path.trim().to_string(), code));
    }
    found
}

#[test]
fn walkthrough_excerpts_match_the_source() {
    let doc = fs::read_to_string(repo_root().join("docs/extending.md")).expect("docs/extending.md");
    let excerpts = excerpts(&doc);
    // Each walkthrough (policy, app, link model, middlebox, MAC) shows its
    // model, its scenario side and its registration line at least.
    assert!(
        excerpts.len() >= 15,
        "only {} excerpts found",
        excerpts.len()
    );
    for (path, code) in excerpts {
        let source =
            fs::read_to_string(repo_root().join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            source.contains(&code),
            "docs/extending.md shows code that is not in {path}:\n{code}"
        );
    }
}

#[test]
fn marked_blocks_are_extracted_up_to_their_fence() {
    let doc = "text\n<!-- excerpt: a.rs -->\n```rust\nfn f() {}\n```\n```rust\nnot marked\n```\n";
    assert_eq!(
        excerpts(doc),
        [("a.rs".to_string(), "fn f() {}\n".to_string())]
    );
}

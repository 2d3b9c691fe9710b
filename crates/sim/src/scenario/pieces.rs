//! Reading a large scenario file in pieces.
//!
//! The TOML parser builds a tree of the whole document, with spans and
//! formatting, before the scenario's tables are read out of it: about 30
//! bytes of memory per byte of text, 1.6 GB for a 50 MB file of small
//! `[[app]]` tables. Cut before its top-level `[[array]]` headers, the
//! document becomes pieces that are valid TOML each, and whose tables,
//! appended in order, are the document's: so a large file is parsed one
//! piece (about [`PIECE_BYTES`]) at a time.
//!
//! Only files whose layout makes that equivalence evident are cut: every
//! header has bare keys, every top-level header is an array of tables, a
//! sub-table header such as `[host.tcp]` follows its own `[[host]]`, and no
//! key before the first header names an array that headers extend. Any
//! other file, and any piece that does not read cleanly, is parsed whole,
//! so errors (and their line numbers) are those of the whole file.

use serde::Deserialize;

use super::raw::{RawCapture, RawHost, RawHostGroup, RawRoute, RawScenario};
use crate::config::Duration;

/// Files up to this size are parsed whole; larger ones in pieces of about
/// this size (at least one top-level table each).
pub(super) const PIECE_BYTES: usize = 1 << 20;

/// A piece of a scenario file: the fields of [`RawScenario`], all optional
/// (the top-level keys are in the first piece only).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPiece {
    name: Option<String>,
    seed: Option<u64>,
    duration: Option<Duration>,
    #[serde(default)]
    host: Vec<RawHost>,
    #[serde(default)]
    host_group: Vec<RawHostGroup>,
    #[serde(default)]
    link: Vec<toml::Table>,
    #[serde(default)]
    route: Vec<RawRoute>,
    #[serde(default)]
    capture: Vec<RawCapture>,
    #[serde(default)]
    app: Vec<toml::Table>,
    #[serde(default)]
    middlebox: Vec<toml::Table>,
}

/// The scenario in `text`, read piece by piece, or `None` when `text` does
/// not split into pieces of at least `piece_bytes` that read cleanly (the
/// caller then parses it whole).
pub(super) fn parse(text: &str, piece_bytes: usize) -> Option<RawScenario> {
    let cuts = cuts(text, piece_bytes)?;
    let ends = cuts.iter().skip(1).copied().chain([text.len()]);
    let mut pieces = cuts.iter().zip(ends).map(|(&start, end)| &text[start..end]);
    let first: RawPiece = toml::from_str(pieces.next()?).ok()?;
    let mut raw = RawScenario {
        name: first.name?,
        seed: first.seed,
        duration: first.duration?,
        host: first.host,
        host_group: first.host_group,
        link: first.link,
        route: first.route,
        capture: first.capture,
        app: first.app,
        middlebox: first.middlebox,
    };
    for piece in pieces {
        let piece: RawPiece = toml::from_str(piece).ok()?;
        if piece.name.is_some() || piece.seed.is_some() || piece.duration.is_some() {
            return None;
        }
        raw.host.extend(piece.host);
        raw.host_group.extend(piece.host_group);
        raw.link.extend(piece.link);
        raw.route.extend(piece.route);
        raw.capture.extend(piece.capture);
        raw.app.extend(piece.app);
        raw.middlebox.extend(piece.middlebox);
    }
    Some(raw)
}

/// Where pieces of at least `piece_bytes` start (the first at 0), each at
/// a top-level `[[array]]` header; `None` when the layout is not one that
/// [`parse`] may cut (see the module's documentation).
fn cuts(text: &str, piece_bytes: usize) -> Option<Vec<usize>> {
    let layout = Layout::scan(text)?;
    let mut cuts = vec![0];
    let mut current: Option<&str> = None;
    for header in &layout.headers {
        let first = header.keys[0];
        if header.keys.len() == 1 {
            // A top-level `[table]` would be the only definition of its key;
            // none is valid in a scenario, so the whole parse reports it.
            if !header.array || layout.root_keys.contains(&first) {
                return None;
            }
            current = Some(first);
            if header.line - cuts[cuts.len() - 1] >= piece_bytes {
                cuts.push(header.line);
            }
        } else if current != Some(first) {
            // `[host.tcp]` after another array: it extends the last host,
            // which may be in an earlier piece.
            return None;
        }
    }
    Some(cuts)
}

/// A table header: where its line starts, whether it is `[[...]]`, and its
/// dotted keys.
#[derive(Debug, PartialEq)]
struct Header<'a> {
    line: usize,
    array: bool,
    keys: Vec<&'a str>,
}

/// The headers of a document and the first key of each line before them.
#[derive(Debug, Default)]
struct Layout<'a> {
    root_keys: Vec<&'a str>,
    headers: Vec<Header<'a>>,
}

fn is_bare_key(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

impl<'a> Layout<'a> {
    /// Reads the document's lexical structure: strings, comments, brackets
    /// of values and headers. `None` for anything it does not recognise (a
    /// quoted key in a header or before the first one, unbalanced brackets),
    /// which only means the document is parsed whole.
    fn scan(text: &'a str) -> Option<Layout<'a>> {
        let bytes = text.as_bytes();
        let mut layout = Layout::default();
        // Brackets and braces open in values; headers only occur outside.
        let mut depth = 0usize;
        let mut line_start = true;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match b {
                b'\n' => {
                    line_start = true;
                    i += 1;
                    continue;
                }
                b' ' | b'\t' | b'\r' => {
                    i += 1;
                    continue;
                }
                b'#' => {
                    i = find(bytes, i, b"\n").unwrap_or(bytes.len());
                    continue;
                }
                _ => {}
            }
            if line_start && depth == 0 {
                line_start = false;
                if b == b'[' {
                    let (array, keys, end) = header(text, i)?;
                    layout.headers.push(Header {
                        line: line_begin(bytes, i),
                        array,
                        keys,
                    });
                    i = end;
                    continue;
                }
                if !is_bare_key(b) {
                    // A quoted key: it could name what a header extends.
                    if layout.headers.is_empty() {
                        return None;
                    }
                } else if layout.headers.is_empty() {
                    let end = (i..bytes.len())
                        .find(|&j| !is_bare_key(bytes[j]))
                        .unwrap_or(bytes.len());
                    layout.root_keys.push(&text[i..end]);
                    i = end;
                    continue;
                }
            }
            line_start = false;
            i = match b {
                b'"' if bytes[i..].starts_with(b"\"\"\"") => multiline_end(bytes, i, b'"')?,
                b'\'' if bytes[i..].starts_with(b"'''") => multiline_end(bytes, i, b'\'')?,
                b'"' => basic_end(bytes, i)?,
                b'\'' => literal_end(bytes, i)?,
                b'[' | b'{' => {
                    depth += 1;
                    i + 1
                }
                b']' | b'}' => {
                    depth = depth.checked_sub(1)?;
                    i + 1
                }
                _ => i + 1,
            };
        }
        (depth == 0).then_some(layout)
    }
}

/// Index of the first `needle` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// Where the line holding index `i` starts.
fn line_begin(bytes: &[u8], i: usize) -> usize {
    bytes[..i]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1)
}

/// The end of the basic string `"..."` opening at `i`.
fn basic_end(bytes: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            b'\n' => return None,
            _ => j += 1,
        }
    }
    None
}

/// The end of the literal string `'...'` opening at `i`.
fn literal_end(bytes: &[u8], i: usize) -> Option<usize> {
    let len = bytes[i + 1..]
        .iter()
        .position(|&b| b == b'\'' || b == b'\n')?;
    (bytes[i + 1 + len] == b'\'').then_some(i + len + 2)
}

/// The end of the multi-line string opening with three `quote`s at `i`.
/// Up to two quotes may end its content, just before the closing three.
fn multiline_end(bytes: &[u8], i: usize, quote: u8) -> Option<usize> {
    let mut j = i + 3;
    while j < bytes.len() {
        if quote == b'"' && bytes[j] == b'\\' {
            j += 2;
        } else if bytes[j] == quote {
            let run = bytes[j..].iter().take_while(|&&b| b == quote).count();
            if run >= 3 {
                return Some(j + run);
            }
            j += run;
        } else {
            j += 1;
        }
    }
    None
}

/// The header opening at `i` (a `[` first on its line): whether it is an
/// array's, its keys, and where its line ends; `None` unless it has only
/// bare keys.
fn header(text: &str, i: usize) -> Option<(bool, Vec<&str>, usize)> {
    let bytes = text.as_bytes();
    let array = bytes.get(i + 1) == Some(&b'[');
    let mut j = i + if array { 2 } else { 1 };
    let skip_blank = |mut j: usize| {
        while matches!(bytes.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        j
    };
    let mut keys = Vec::new();
    loop {
        j = skip_blank(j);
        let start = j;
        while bytes.get(j).copied().is_some_and(is_bare_key) {
            j += 1;
        }
        if j == start {
            return None;
        }
        keys.push(&text[start..j]);
        j = skip_blank(j);
        match bytes.get(j) {
            Some(b'.') => j += 1,
            Some(b']') => break,
            _ => return None,
        }
    }
    let close: &[u8] = if array { b"]]" } else { b"]" };
    if !bytes[j..].starts_with(close) {
        return None;
    }
    j = skip_blank(j + close.len());
    match bytes.get(j) {
        None | Some(b'\n' | b'#' | b'\r') => {}
        _ => return None,
    }
    Some((array, keys, j))
}

#[cfg(test)]
mod tests {
    use super::super::raw;
    use super::*;

    fn headers(text: &str) -> Vec<(bool, Vec<&str>)> {
        Layout::scan(text)
            .expect("scans")
            .headers
            .into_iter()
            .map(|h| (h.array, h.keys))
            .collect()
    }

    #[test]
    fn finds_headers_and_only_headers() {
        let text = r#"
name = "x" # [[not]]
note = """
[[app]]
"""
note2 = '''
[[app]] ''' 
list = [
  [1, 2],
  { a = "]" },
]
[[ host ]]
name = "a"
[host.tcp]
x = "[[app]]"
[[app]] # a comment
kind = 'sink'
"#;
        assert_eq!(
            headers(text),
            vec![
                (true, vec!["host"]),
                (false, vec!["host", "tcp"]),
                (true, vec!["app"]),
            ]
        );
        let layout = Layout::scan(text).unwrap();
        assert_eq!(layout.root_keys, ["name", "note", "note2", "list"]);
        let at = text.find("[[app]] # a comment").unwrap();
        assert_eq!(layout.headers[2].line, at);
    }

    #[test]
    fn quotes_close_where_toml_closes_them() {
        // Two quotes may end a multi-line string's content; escaped quotes
        // do not close a basic string.
        let text = "a = \"\"\"x\"\"\"\"\"\nb = \"q\\\"[\"\n[[app]]\n";
        assert_eq!(headers(text), vec![(true, vec!["app"])]);
    }

    #[test]
    fn layouts_it_cannot_vouch_for_are_left_whole() {
        for text in [
            "name = \"x\"\n[[\"app\"]]\n",      // quoted header key
            "\"name\" = \"x\"\n[[app]]\n",      // quoted root key
            "app = []\n[[app]]\n",              // root key extended by headers
            "[[host]]\n[[link]]\n[host.tcp]\n", // sub-table of an earlier piece's host
            "[top]\n",                          // top-level plain table
            "a = [\n",                          // unbalanced
        ] {
            assert_eq!(cuts(text, 1), None, "{text:?}");
        }
    }

    #[test]
    fn every_shipped_scenario_reads_the_same_in_pieces() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
        let mut cut = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            // The emulator's scenarios have fields of their own.
            let Ok(whole) = raw::parse_whole(&text) else {
                continue;
            };
            if let Some(pieces) = parse(&text, 1) {
                assert_eq!(pieces, whole, "{}", path.display());
                cut += 1;
            }
        }
        // Most are cut (not those with a `[host.tcp]` after a link).
        assert!(cut >= 8, "{cut}");
    }

    /// Values in the property test's documents: strings, comments and
    /// arrays that hold header-like text.
    const VALUES: &[&str] = &[
        "1",
        r#""[[app]]""#,
        "'[[host]]'",
        "\"\"\"\n[[app]]\n\"\"\"",
        "'''\n[link]\n'''",
        "[\n  [1],\n  { a = \"]\" },\n]",
        r#""q\"[[""#,
        "1 # [[app]]",
        r#""""x""""""#,
    ];
    /// Lines that break the layout pieces rely on, or TOML itself.
    const DISRUPTIONS: &[&str] = &[
        "[host.tcp]",
        r#"["app"]"#,
        "[top]",
        r#"[["app"]]"#,
        "[[",
        "x = '",
    ];
    const ARRAYS: &[&str] = &["app", "link", "middlebox", "host"];

    /// A scenario-like document: top-level keys, then tables of each kind
    /// with sub-tables, and now and then a disruption.
    fn document(blocks: &[(usize, Vec<usize>, bool, usize)]) -> String {
        let mut text = "name = \"s\"\nduration = \"1s\"\n".to_string();
        for (i, (kind, values, sub, disruption)) in blocks.iter().enumerate() {
            let kind = ARRAYS[*kind];
            let spaced = if i % 3 == 0 { " " } else { "" };
            text += &format!("[[{spaced}{kind}{spaced}]]\n");
            if kind == "host" {
                // A host takes no other keys; its `tcp` table takes any.
                text += &format!("name = \"h{i}\"\n");
                if *sub || !values.is_empty() {
                    text += "[host.tcp]\n";
                }
            } else if *sub {
                text += &format!("[{kind}.sub]\n");
            }
            for (j, v) in values.iter().enumerate() {
                text += &format!("k{j} = {}\n", VALUES[*v]);
            }
            if let Some(line) = DISRUPTIONS.get(*disruption) {
                text += line;
                text += "\n";
            }
        }
        text
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(1024))]
        /// Whatever is read in pieces reads the same whole.
        #[test]
        fn pieces_never_disagree_with_the_whole(
            blocks in proptest::collection::vec(
                (
                    0..ARRAYS.len(),
                    proptest::collection::vec(0..VALUES.len(), 0..4),
                    proptest::bool::ANY,
                    0..DISRUPTIONS.len() * 16,
                ),
                0..30,
            ),
            piece_bytes in 1usize..200,
        ) {
            let text = document(&blocks);
            if let Some(pieces) = parse(&text, piece_bytes) {
                proptest::prop_assert_eq!(Some(pieces), raw::parse_whole(&text).ok(), "{}", text);
            }
        }
    }

    #[test]
    fn the_property_test_reaches_both_outcomes() {
        // Documents without disruptions are read in pieces; each disruption
        // makes the pieces give way to the whole parse.
        let clean: Vec<_> = (0..12)
            .map(|i| {
                (
                    i % ARRAYS.len(),
                    vec![i % VALUES.len()],
                    i % 2 == 0,
                    usize::MAX,
                )
            })
            .collect();
        let text = document(&clean);
        let pieces = parse(&text, 1).expect("cut");
        assert_eq!(pieces, raw::parse_whole(&text).unwrap());
        assert_eq!(pieces.app.len(), 3);
        for (d, line) in DISRUPTIONS.iter().enumerate() {
            let mut blocks = clean.clone();
            blocks[5].3 = d;
            assert_eq!(parse(&document(&blocks), 1), None, "{line}");
        }
    }

    /// A scenario of `apps` sink apps, 1 MiB for about 16 000.
    fn many_apps(apps: usize) -> String {
        let mut text = "name = \"s\"\nduration = \"1s\"\n[[host]]\nname = \"b\"\n".to_string();
        for i in 0..apps {
            text += &format!(
                "[[app]]\nkind = \"sink\"\nname = \"sink{i}\"\nhost = \"b\"\nport = {i}\n"
            );
        }
        text
    }

    #[test]
    fn a_large_file_reads_in_pieces_and_fails_as_a_whole() {
        let text = many_apps(18_000);
        assert!(text.len() > PIECE_BYTES);
        assert!(cuts(&text, PIECE_BYTES).unwrap().len() >= 2);
        let read = super::super::parse_tables(&text).unwrap();
        assert_eq!(read.app.len(), 18_000);
        assert_eq!(read, raw::parse_whole(&text).unwrap());
        // A syntax error near the end is reported at its line in the file.
        let broken = format!("{text}[[app]]\nport = = 3\n");
        let line = broken.lines().count();
        let err = super::super::parse_tables(&broken).unwrap_err();
        assert_eq!(err.path, format!("line {line}, column 8"), "{err:?}");
    }

    #[test]
    fn pieces_start_at_top_level_arrays_once_big_enough() {
        let text = "name = \"x\"\n[[host]]\nname = \"a\"\n[host.tcp]\n[[app]]\n[[app]]\n";
        let at = |s: &str| text.find(s).unwrap();
        assert_eq!(
            cuts(text, 1),
            Some(vec![
                0,
                at("[[host]]"),
                at("[[app]]"),
                text.rfind("[[app]]").unwrap()
            ])
        );
        assert_eq!(cuts(text, text.len()), Some(vec![0]));
    }
}

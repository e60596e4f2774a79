//! Reading input files with a bound: every file meshsim reads (cluster and SoC descriptions,
//! parameter files, workloads, regression suites and baselines) goes through [`read_input`], so
//! a huge file, or a device that never ends such as `/dev/zero`, is refused in one line instead
//! of filling memory.

use std::io::Read;
use std::path::Path;

/// The most bytes meshsim reads from one input file: 4 MiB, a hundred times the largest cluster
/// description published (a 32-chip Galaxy's is about 20 KB).
pub const MAX_INPUT_BYTES: u64 = 4 << 20;

/// Reads the file at `path`, without reading past [`MAX_INPUT_BYTES`]; a larger file is an
/// error of kind `InvalidData` saying so.
pub fn read_input(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the {} MiB meshsim reads from an input file", MAX_INPUT_BYTES >> 20),
        ));
    }
    Ok(bytes)
}

/// [`read_input`] as UTF-8 text, without a leading byte-order mark (editors on Windows write
/// one; it is not part of the YAML).
pub fn read_input_text(path: &Path) -> std::io::Result<String> {
    let bytes = read_input(path)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
        )
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// The deepest nesting of flow collections (`[...]`, `{...}`) meshsim reads. The published
/// cluster and SoC descriptors and the project's own files nest at most 4 deep; the YAML
/// parser's cost grows with the square of the depth, so a small file of deeply nested brackets
/// would otherwise take minutes to be refused.
pub const MAX_FLOW_DEPTH: usize = 64;

/// Flow collections nested deeper than [`MAX_FLOW_DEPTH`]: where the first one too deep opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("brackets nested more than {MAX_FLOW_DEPTH} deep: meshsim reads at most {MAX_FLOW_DEPTH} levels")]
pub struct TooDeep {
    /// Its line, from 1.
    pub line: usize,
    /// Its column, from 1.
    pub column: usize,
}

/// Where `text` first nests flow collections deeper than [`MAX_FLOW_DEPTH`], in one pass over
/// the text (quoted scalars and comments are skipped: a bracket inside them is not a
/// collection).
pub fn check_nesting(text: &str) -> Result<(), TooDeep> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    let mut prev = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        column += 1;
        let starts_token = prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':');
        match c {
            '\n' => {
                line += 1;
                column = 0;
            }
            '#' if prev.is_whitespace() => while chars.next_if(|&x| x != '\n').is_some() {},
            '\'' | '"' if starts_token => {
                // A quoted scalar: to its closing quote ('' and \" are escapes), across lines.
                while let Some(x) = chars.next() {
                    column += 1;
                    if x == '\n' {
                        line += 1;
                        column = 0;
                    } else if c == '"' && x == '\\' {
                        chars.next();
                        column += 1;
                    } else if x == c && !(c == '\'' && chars.next_if_eq(&'\'').is_some()) {
                        break;
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(TooDeep { line, column });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    Ok(())
}

/// Parses YAML text into `T` after [`check_nesting`]: every YAML file meshsim reads goes through
/// here, so no input costs more than linear time to refuse.
pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_yaml::Error> {
    check_nesting(text).map_err(|e| {
        let message = format!("{e} (line {}, column {})", e.line, e.column);
        <serde_yaml::Error as serde::de::Error>::custom(message)
    })?;
    serde_yaml::from_str(text)
}

/// A YAML parser's message in the words of the file, not of the Rust types it is read into:
/// `expected u64` becomes `expected a whole number from 0 to 18446744073709551615`, and so on.
pub fn plain_message(message: &str) -> String {
    let message = &suggest_known(message);
    const TYPES: [(&str, &str); 10] = [
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number from 0 to 4294967295"),
        ("u64", "a whole number from 0 to 18446744073709551615"),
        ("u128", "a whole number of at most 39 digits"),
        ("usize", "a whole number from 0 to 18446744073709551615"),
        ("i32", "a whole number from -2147483648 to 2147483647"),
        ("i64", "a whole number from -9223372036854775808 to 9223372036854775807"),
        ("f64", "a number"),
        ("bool", "true or false"),
    ];
    let mut out = message.to_owned();
    for (ty, words) in TYPES {
        for lead in ["expected ", "invalid type: "] {
            let from = format!("{lead}{ty}");
            // Only whole words: `u64` but not `u64s`.
            let mut at = 0;
            while let Some(i) = out[at..].find(&from).map(|i| i + at) {
                let end = i + from.len();
                if out[end..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                    at = end;
                    continue;
                }
                out.replace_range(i..end, &format!("{lead}{words}"));
                at = i + lead.len() + words.len();
            }
        }
    }
    out
}

/// The candidate closest to `word` if it is a likely misspelling of it (an edit distance of at
/// most a third of its length, at least 1; or one holding the other with `_`/`-` swapped).
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let w = norm(word);
    let most = (w.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&w, &norm(c)), c))
        .filter(|&(d, _)| d <= most)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance between two strings, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (and its `variant` twin) with the list
/// replaced by the one it most likely meant, when one is close.
fn suggest_known(message: &str) -> String {
    for kind in ["unknown field `", "unknown variant `"] {
        let Some(at) = message.find(kind) else { continue };
        let rest = &message[at + kind.len()..];
        let Some(end) = rest.find('`') else { continue };
        let word = &rest[..end];
        let after = &rest[end + 1..];
        let Some(list) =
            after.strip_prefix(", expected one of ").or_else(|| after.strip_prefix(", expected "))
        else {
            continue;
        };
        // The list ends where the location (" at line") or the message does.
        let list_end = list.find(" at line").unwrap_or(list.len());
        let names: Vec<&str> = list[..list_end].split('`').skip(1).step_by(2).collect();
        if let Some(m) = did_you_mean(word, names.iter().copied()) {
            return format!("{}{kind}{word}` (did you mean `{m}`?){}", &message[..at], &list[list_end..]);
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod message_tests {
    #[test]
    fn misspelt_keys_and_values_name_what_was_meant() {
        assert_eq!(super::did_you_mean("num_linkz", ["name", "num_links", "workers"]), Some("num_links"));
        assert_eq!(super::did_you_mean("all_gater", ["all-gather", "reduce-scatter"]), Some("all-gather"));
        assert_eq!(super::did_you_mean("frobnicate", ["name", "num_links"]), None);
        assert_eq!(
            super::plain_message(
                "ops[0]: unknown field `num_linkz`, expected one of `name`, `num_links` at line 3 column 7"
            ),
            "ops[0]: unknown field `num_linkz` (did you mean `num_links`?) at line 3 column 7"
        );
        let far = "unknown field `zzz`, expected `a` or `b`";
        assert_eq!(super::plain_message(far), far);
    }

    #[test]
    fn deep_flow_nesting_is_refused_in_linear_time_naming_the_place() {
        // 200,000 levels (400 KB) took minutes in the parser; the scan refuses it at once.
        let deep = format!("arch: {}{}\n", "[".repeat(200_000), "]".repeat(200_000));
        let err = super::from_yaml::<serde_yaml::Value>(&deep).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "brackets nested more than 64 deep: meshsim reads at most 64 levels (line 1, column 71)"
            ),
            "{err}"
        );
        // At the limit it parses; brackets in quotes and comments do not count.
        let ok = format!("a: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert!(super::from_yaml::<serde_yaml::Value>(&ok).is_ok());
        let quoted =
            format!("a: '{}'\nb: \"{}\" # {}\nc: it's [1]\n", "[".repeat(99), "{".repeat(99), "[".repeat(99));
        let v: serde_yaml::Value = super::from_yaml(&quoted).unwrap();
        assert_eq!(v["a"].as_str().unwrap().len(), 99);
        assert_eq!(super::check_nesting(&format!("x: '{}''", "[".repeat(65))), Ok(()));
        assert_eq!(super::check_nesting("a:\n  - [[[[\n"), Ok(()));
        let deep = format!("a: 1\n# [[[\nb: {}", "{".repeat(65));
        assert_eq!(super::check_nesting(&deep), Err(super::TooDeep { line: 3, column: 68 }));
    }

    #[test]
    fn type_names_become_words() {
        assert_eq!(
            super::plain_message("arch: invalid type: string \"x\", expected u64"),
            "arch: invalid type: string \"x\", expected a whole number from 0 to 18446744073709551615"
        );
        assert_eq!(super::plain_message("expected u64s"), "expected u64s");
    }

    use super::*;

    #[test]
    fn endless_and_oversized_files_are_refused_without_reading_them_whole() {
        let err = read_input(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("4 MiB"), "{err}");
        let dir = std::env::temp_dir().join(format!("meshsim-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bom.yaml");
        std::fs::write(&f, "\u{feff}arch: {}\n").unwrap();
        assert_eq!(read_input_text(&f).unwrap(), "arch: {}\n");
        std::fs::write(&f, vec![b'#'; MAX_INPUT_BYTES as usize]).unwrap();
        assert_eq!(read_input(&f).unwrap().len() as u64, MAX_INPUT_BYTES);
        std::fs::write(&f, vec![b'#'; MAX_INPUT_BYTES as usize + 1]).unwrap();
        assert!(read_input(&f).is_err());
    }
}

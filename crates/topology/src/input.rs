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

/// A YAML parser's message in the words of the file, not of the Rust types it is read into:
/// `expected u64` becomes `expected a whole number from 0 to 18446744073709551615`, and so on.
pub fn plain_message(message: &str) -> String {
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

#[cfg(test)]
mod message_tests {
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

//! Errors in cluster and SoC descriptions: always naming the file, the place and the problem.

use thiserror::Error;

/// A cluster or SoC description that cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TopologyError {
    /// The file could not be read.
    #[error("{file}: cannot read: {reason}")]
    Io {
        /// The path as given.
        file: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The file has no content.
    #[error("{file}: file is empty")]
    Empty {
        /// The path as given.
        file: String,
    },
    /// The file holds only comments.
    #[error("{file}: holds only comments, no cluster description")]
    OnlyComments {
        /// The path as given.
        file: String,
    },
    /// The file is not text.
    #[error("{file}: not a YAML text file (binary data at byte {offset})")]
    Binary {
        /// The path as given.
        file: String,
        /// Offset of the first byte that is not text.
        offset: usize,
    },
    /// The YAML does not parse, or a value has the wrong type.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The path as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The YAML parses but describes something impossible.
    #[error("{file}: {entry}: {message}")]
    Invalid {
        /// The path as given.
        file: String,
        /// Where in the file: a key, or a list entry such as `ethernet_connections[3]`.
        entry: String,
        /// What is wrong.
        message: String,
    },
    /// A cluster name that is neither a file nor one of the built-in clusters.
    #[error(
        "unknown cluster '{name}': not a file, not one of the built-in clusters ({known}), and not a generated one (ring:N, line:N, mesh:RxC, torus:RxC)"
    )]
    UnknownCluster {
        /// The name given.
        name: String,
        /// The built-in names, comma-separated.
        known: String,
    },
}

impl TopologyError {
    pub(crate) fn invalid(file: &str, entry: impl Into<String>, message: impl Into<String>) -> Self {
        TopologyError::Invalid { file: file.to_owned(), entry: entry.into(), message: message.into() }
    }

    /// Parses YAML `text` of `file` into `T`: too deep a nesting, or what the parser refuses,
    /// with its line and column.
    pub(crate) fn parse_yaml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, Self> {
        crate::input::check_nesting(text).map_err(|e| TopologyError::Syntax {
            file: file.to_owned(),
            line: e.line,
            column: e.column,
            message: e.to_string(),
        })?;
        serde_yaml::from_str(text).map_err(|e| TopologyError::yaml(file, e))
    }

    /// Converts a YAML error, keeping the parser's location when it has one.
    pub(crate) fn yaml(file: &str, err: serde_yaml::Error) -> Self {
        let message = crate::input::plain_message(&err.to_string());
        // The parser appends " at line L column C" to its message; the location goes in front.
        let message = match message.find(" at line ") {
            Some(i) => message[..i].to_owned(),
            None => message,
        };
        match err.location() {
            Some(loc) => TopologyError::Syntax {
                file: file.to_owned(),
                line: loc.line(),
                column: loc.column(),
                message,
            },
            None => TopologyError::invalid(file, "document", message),
        }
    }
}

/// Checks that `bytes` are non-empty UTF-8 text without NUL bytes and returns the text.
pub(crate) fn text_of<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, TopologyError> {
    // A byte-order mark is not part of the YAML.
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(TopologyError::Empty { file: file.to_owned() });
    }
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(TopologyError::Binary { file: file.to_owned(), offset });
    }
    std::str::from_utf8(bytes)
        .map_err(|e| TopologyError::Binary { file: file.to_owned(), offset: e.valid_up_to() })
}

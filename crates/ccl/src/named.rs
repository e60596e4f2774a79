//! Small closed sets of values named once: each value's name on the command line and in
//! files, its parser with the one message that lists the names, and its reading from files
//! through that parser.

/// Parses and names a small closed set of values, so the CLI, suites and workloads agree.
macro_rules! named {
    ($t:ident, $what:literal, $($v:ident => $s:literal),+ $(,)?) => {
        $crate::named::named!($t, $what, $($v => $s),+; aliases:);
    };
    // `aliases: "other" => Variant`: further names a value is read by (tt-metal's spelling where
    // meshsim's differs); it is always written by its own name.
    ($t:ident, $what:literal, $($v:ident => $s:literal),+; aliases: $($a:literal => $av:ident),*) => {
        impl $t {
            /// The name used on the command line and in files.
            pub fn as_str(self) -> &'static str {
                match self { $($t::$v => $s),+ }
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($t::$v),)+
                    $($a => Ok($t::$av),)*
                    _ => Err(format!(concat!("unknown ", $what, " '{}' ({})"), s, [$($s),+].join(", "))),
                }
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        $crate::named::deserialize_by_name!($t);
    };
}
pub(crate) use named;

/// Reads a value from files (suites, workloads) by its [`FromStr`], so a file and a flag
/// spell it alike and are refused with the same message.
macro_rules! deserialize_by_name {
    ($t:ty) => {
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use deserialize_by_name;

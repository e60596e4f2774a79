//! The house rules of docs/ARCHITECTURE.md that can be measured, read off the source tree:
//! no import circle between files, no file over 1,000 lines, and no function outside tests over
//! 80 lines but those on [`LONG_FUNCTIONS`], each with its reason. A rule that nothing checks
//! drifts: this test is what keeps the page true.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Functions allowed past 80 lines, with why: at most five.
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[
    (
        "crates/ccl/src/fabric/router.rs",
        "run",
        "the router's service loop, in tt-metal's own step order; the simulation's hot path",
    ),
    (
        "crates/ccl/src/fabric/router.rs",
        "receive_step",
        "the router's receiver step, the firmware's order; every packet passes it",
    ),
    (
        "crates/ccl/src/fabric/router.rs",
        "send_step",
        "the router's sender step, the firmware's order; every packet passes it",
    ),
    (
        "crates/ccl/src/fabric/mux.rs",
        "run",
        "the Tensix mux's service loop; every packet of a muxed worker passes it",
    ),
];

const MAX_FILE_LINES: usize = 1000;
const MAX_FUNCTION_LINES: usize = 80;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file of the workspace (relative paths), outside `target`.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&p, out);
                }
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out.sort();
    out.into_iter().map(|p| p.strip_prefix(root()).unwrap().to_path_buf()).collect()
}

/// The source with comments, strings and character literals blanked (same length, same
/// lines), so braces and paths are read as code only.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |e| i + e);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if b[i] == b'r'
            && (b[i + 1..].starts_with(b"\"") || b[i + 1..].starts_with(b"#"))
            && !ident(b, i)
        {
            // A raw string: r"..." or r#"..."#.
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let start = i + 2 + hashes;
            let end =
                (start..b.len()).find(|&j| b[j..].starts_with(&close)).map_or(b.len(), |j| j + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, (j + 1).min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{7f}'), not a lifetime.
            let len = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                std::str::from_utf8(&b[i + 1..(i + 6).min(b.len())])
                    .ok()
                    .or_else(|| std::str::from_utf8(&b[i + 1..(i + 5).min(b.len())]).ok())
                    .and_then(|s| s.chars().next())
                    .filter(|c| b.get(i + 1 + c.len_utf8()) == Some(&b'\''))
                    .map(|c| c.len_utf8() + 2)
            };
            match len {
                Some(l) => {
                    blank(&mut out, i, i + l);
                    i += l;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 boundaries of code")
}

/// Whether the byte before `i` continues an identifier (so `b[i]` is not a token's start).
fn ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The code without its `#[cfg(test)]` items (a test module or function is removed up to its
/// closing brace).
fn without_tests(code: &str) -> String {
    let mut out = code.to_owned();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|p| p + from) {
        let Some(open) = out[at..].find('{').map(|p| p + at) else { break };
        let close = matching(&out, open);
        let blanked: String = out[at..=close].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
        out.replace_range(at..=close, &blanked);
        from = close + 1;
    }
    out
}

/// The index of the brace closing the one at `open`.
fn matching(code: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i;
                }
            }
            _ => {}
        }
    }
    code.len() - 1
}

/// A crate's source root, and each file's module path within it.
struct Crate {
    root: PathBuf,
    modules: BTreeMap<Vec<String>, PathBuf>,
}

/// The module path of `file` under `root` (`lib.rs`/`main.rs` the crate root, `x/mod.rs` x).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap();
    let mut parts: Vec<String> =
        rel.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The crates of the workspace: each `src/` with its files.
fn crates(files: &[PathBuf]) -> Vec<Crate> {
    let roots: BTreeSet<PathBuf> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "lib.rs" || n == "main.rs"))
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .filter(|d| d.ends_with("src"))
        .collect();
    roots
        .into_iter()
        .map(|root| {
            let modules = files
                .iter()
                .filter(|f| f.starts_with(&root) && !f.starts_with(root.join("bin")))
                .map(|f| (module_of(&root, f), f.clone()))
                .collect();
            Crate { root, modules }
        })
        .collect()
}

/// The paths a `use` tree names, braces expanded (`a::{b, c::d}` is `a::b` and `a::c::d`).
fn use_paths(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else { return vec![tree] };
    let prefix = &tree[..open];
    let close = matching(&tree, open);
    let mut out = Vec::new();
    let inner = &tree[open + 1..close];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(use_paths(&format!("{prefix}{}", &inner[start..i])));
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < inner.len() {
        out.extend(use_paths(&format!("{prefix}{}", &inner[start..])));
    }
    out
}

/// The file a path from module `me` leads to, if it is another file of the crate: the longest
/// prefix of the path that is a module with a file of its own.
fn target(c: &Crate, me: &[String], path: &str) -> Option<PathBuf> {
    let mut parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut at: Vec<String> = match parts.first().copied() {
        Some("crate") => Vec::new(),
        Some("super") | Some("self") => me.to_vec(),
        _ => return None,
    };
    while let Some(&p) = parts.first() {
        match p {
            "crate" => {}
            "self" => {}
            "super" => {
                at.pop();
            }
            _ => break,
        }
        parts.remove(0);
    }
    let mut best = c.modules.get(&at).cloned();
    for p in parts {
        at.push(p.to_owned());
        match c.modules.get(&at) {
            Some(f) => best = Some(f.clone()),
            None => break,
        }
    }
    best
}

/// Every file's imports of other files of its crate: `use` declarations and paths written in
/// code (`crate::x::y`, `super::z`), tests left out; a module's `pub use` of its own
/// submodules' items hands them on and is not an import.
fn import_graph(files: &[PathBuf]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for c in crates(files) {
        for (me, file) in &c.modules {
            let src = std::fs::read_to_string(root().join(file)).unwrap();
            let code = without_tests(&code_only(&src));
            let mut paths: Vec<(String, bool)> = Vec::new();
            let mut rest = code.as_str();
            // `use` declarations (with `pub` or not), then every other path in the code.
            while let Some(at) = find_word(rest, "use") {
                let before = rest[..at].trim_end();
                let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
                let end = rest[at..].find(';').map_or(rest.len(), |e| at + e);
                for p in use_paths(&rest[at + 3..end]) {
                    paths.push((p, public));
                }
                rest = &rest[end..];
            }
            for kw in ["crate::", "super::", "self::"] {
                let mut from = 0;
                while let Some(at) = code[from..].find(kw).map(|p| p + from) {
                    from = at + kw.len();
                    if ident(code.as_bytes(), at) || code[..at].ends_with("::") {
                        continue;
                    }
                    let len = code[at..]
                        .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == ':'))
                        .unwrap_or(code.len() - at);
                    paths.push((code[at..at + len].to_owned(), false));
                }
            }
            for (p, public) in paths {
                let Some(t) = target(&c, me, &p) else { continue };
                let to_child = module_of(&c.root, &t).starts_with(me);
                if t != *file && !(public && to_child) {
                    graph.entry(file.clone()).or_default().insert(t);
                }
            }
            graph.entry(file.clone()).or_default();
        }
    }
    graph
}

/// Where the word `w` next stands on its own in `s` (not inside an identifier).
fn find_word(s: &str, w: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(at) = s[from..].find(w).map(|p| p + from) {
        let after = b.get(at + w.len()).copied().unwrap_or(b' ');
        if !ident(b, at) && after.is_ascii_whitespace() {
            return Some(at);
        }
        from = at + w.len();
    }
    None
}

/// The strongly connected groups of more than one file (Tarjan's algorithm).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'g> {
        g: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on: BTreeSet<&'g PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g PathBuf) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    let w = self.g.get_key_value(w).map_or(w, |(k, _)| k);
                    self.visit(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.on.contains(w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    group.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.out.push(group);
                }
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// Every function outside tests with its file, name and length in lines (signature to closing
/// brace).
fn functions(files: &[PathBuf]) -> Vec<(PathBuf, String, usize)> {
    let mut out = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with("tests") && !f.iter().any(|p| p == "tests")) {
        let src = std::fs::read_to_string(root().join(file)).unwrap();
        let code = without_tests(&code_only(&src));
        let mut from = 0;
        while let Some(at) = find_word(&code[from..], "fn").map(|p| p + from) {
            from = at + 2;
            let name: String = code[at + 2..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // The body's brace: the first `{` before any `;` (a declaration without a body).
            let Some(open) = code[at..].find(['{', ';']).map(|p| p + at).filter(|&o| &code[o..=o] == "{")
            else {
                continue;
            };
            let close = matching(&code, open);
            let lines = code[at..=close].lines().count();
            out.push((file.clone(), name, lines));
        }
    }
    out
}

#[test]
fn no_import_circle_between_files() {
    let graph = import_graph(&rust_files());
    assert!(graph.len() > 50, "the import graph reads the crates' files ({} found)", graph.len());
    let found = circles(&graph);
    let show: Vec<String> = found
        .iter()
        .map(|g| {
            let names: Vec<String> = g.iter().map(|f| f.display().to_string()).collect();
            let ties: Vec<String> = g
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| g.contains(b))
                        .map(move |b| format!("{} -> {}", a.display(), b.display()))
                })
                .collect();
            format!("{}\n    {}", names.join(", "), ties.join("\n    "))
        })
        .collect();
    assert!(found.is_empty(), "import circles between files:\n  {}", show.join("\n  "));
}

#[test]
fn no_file_over_a_thousand_lines() {
    let long: Vec<String> = rust_files()
        .into_iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(root().join(&f)).unwrap().lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_FILE_LINES} lines: {long:?}");
}

#[test]
fn no_function_over_eighty_lines_but_the_listed_service_loops() {
    assert!(LONG_FUNCTIONS.len() <= 5, "at most five long functions may be listed");
    let all = functions(&rust_files());
    assert!(all.len() > 500, "the scan finds the workspace's functions ({} found)", all.len());
    let long: Vec<&(PathBuf, String, usize)> = all.iter().filter(|f| f.2 > MAX_FUNCTION_LINES).collect();
    let listed =
        |f: &(PathBuf, String, usize)| LONG_FUNCTIONS.iter().any(|l| Path::new(l.0) == f.0 && l.1 == f.1);
    let unlisted: Vec<String> = long
        .iter()
        .filter(|f| !listed(f))
        .map(|f| format!("{}: {} ({} lines)", f.0.display(), f.1, f.2))
        .collect();
    assert!(
        unlisted.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines not on the list:\n  {}",
        unlisted.join("\n  ")
    );
    // The list holds only what is still long: a loop split below the limit leaves it.
    let stale: Vec<&str> = LONG_FUNCTIONS
        .iter()
        .filter(|l| !long.iter().any(|f| Path::new(l.0) == f.0 && l.1 == f.1))
        .map(|l| l.1)
        .collect();
    assert!(stale.is_empty(), "listed as long but not over {MAX_FUNCTION_LINES} lines: {stale:?}");
}

#[test]
fn the_scanner_reads_rust_as_code() {
    // Braces in strings, characters and comments are not code; a lifetime is not a character.
    let src = "fn a<'x>(s: &'x str) -> char { let _ = \"}{\"; let _ = r#\"{\"#; // }\n '{' }\n";
    let code = code_only(src);
    assert_eq!(matching(&code, code.find('{').unwrap()), code.rfind('}').unwrap());
    assert_eq!(use_paths("super::{a, b::{c, d}}"), ["super::a", "super::b::c", "super::b::d"]);
    // Test modules are not the program.
    let t = without_tests("fn f() {}\n#[cfg(test)]\nmod tests { fn g() { crate::x::y(); } }\n");
    assert!(!t.contains("crate::x") && t.contains("fn f"));
}

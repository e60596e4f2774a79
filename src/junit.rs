//! `regress --format junit`: the gate's verdicts as JUnit XML, the format CI dashboards read
//! (GitLab, Jenkins, GitHub actions that publish test reports): one `<testsuite>` per regression
//! suite, one `<testcase>` per scenario, a `<failure>` naming what moved and by how much, an
//! `<error>` for a run that failed, `<skipped/>` for what the flow model does not run.

use std::fmt::Write as _;

use crate::regress::{FlowRow, Row, Status};

/// One test case: its suite and name, and what it came to.
pub(crate) struct Case {
    pub suite: String,
    pub name: String,
    pub verdict: Verdict,
    /// What it measured, for `<system-out>`.
    pub out: String,
}

/// A test case's outcome.
pub(crate) enum Verdict {
    Pass,
    /// The gate failed on it: kind (`moved`, `new`, `missing`, `over`) and message.
    Failure(&'static str, String),
    /// Its simulation failed.
    Error(String),
    Skipped(String),
}

/// `&`, `<`, `>`, `"` and `'` as XML entities; control characters XML 1.0 forbids dropped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// A µs figure or `-`.
fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3} us"))
}

/// The packet gate's rows as cases.
pub(crate) fn gate_cases(rows: &[Row]) -> Vec<Case> {
    rows.iter()
        .map(|r| {
            let change = r.change_pct.map_or(String::new(), |c| format!("{c:+.3} %"));
            let verdict = match r.status {
                Status::Ok | Status::Updated => Verdict::Pass,
                Status::Moved => Verdict::Failure(
                    "moved",
                    format!(
                        "moved {change} (baseline {}, now {}; tolerance {} %)",
                        us(r.baseline_us),
                        us(r.now_us),
                        r.tolerance_pct
                    ),
                ),
                Status::New => Verdict::Failure("new", format!("no baseline entry (now {})", us(r.now_us))),
                Status::Missing => Verdict::Failure(
                    "missing",
                    format!("a baseline entry ({}) with no scenario", us(r.baseline_us)),
                ),
                Status::Error => Verdict::Error(r.error.clone().unwrap_or_default()),
            };
            let out = format!("baseline {}, now {} {change}", us(r.baseline_us), us(r.now_us));
            Case { suite: r.suite.clone(), name: r.scenario.clone(), verdict, out }
        })
        .collect()
}

/// `regress --model flow`'s rows as cases.
pub(crate) fn flow_cases(rows: &[FlowRow]) -> Vec<Case> {
    rows.iter()
        .map(|r| {
            let err = r.error_pct.map_or(String::new(), |e| format!("{e:+.2} %"));
            let note = r.note.clone().unwrap_or_default();
            let verdict = match r.status {
                "ok" => Verdict::Pass,
                "over" => Verdict::Failure(
                    "over",
                    format!(
                        "flow {} against packet {}: {err}, beyond the {} % bound",
                        us(r.flow_us),
                        us(r.packet_us),
                        r.bound_pct
                    ),
                ),
                "skipped" => Verdict::Skipped(note),
                _ => Verdict::Error(note),
            };
            let out = format!("packet {}, flow {} {err}", us(r.packet_us), us(r.flow_us));
            Case { suite: r.suite.clone(), name: r.scenario.clone(), verdict, out }
        })
        .collect()
}

/// The cases as one JUnit document named `name`, suites in order of first appearance.
pub(crate) fn render(name: &str, cases: &[Case]) -> String {
    let mut suites: Vec<(&str, Vec<&Case>)> = Vec::new();
    for c in cases {
        match suites.iter_mut().find(|s| s.0 == c.suite) {
            Some(s) => s.1.push(c),
            None => suites.push((&c.suite, vec![c])),
        }
    }
    let count = |cs: &[&Case], f: fn(&Verdict) -> bool| cs.iter().filter(|c| f(&c.verdict)).count();
    let failed = |v: &Verdict| matches!(v, Verdict::Failure(..));
    let errored = |v: &Verdict| matches!(v, Verdict::Error(_));
    let skipped = |v: &Verdict| matches!(v, Verdict::Skipped(_));
    let all: Vec<&Case> = cases.iter().collect();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        escape(name),
        all.len(),
        count(&all, failed),
        count(&all, errored),
        count(&all, skipped)
    );
    for (suite, cs) in &suites {
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            escape(suite),
            cs.len(),
            count(cs, failed),
            count(cs, errored),
            count(cs, skipped)
        );
        for c in cs {
            let _ = write!(
                x,
                "    <testcase classname=\"meshsim.{}\" name=\"{}\">",
                escape(suite),
                escape(&c.name)
            );
            match &c.verdict {
                Verdict::Pass => {}
                Verdict::Failure(kind, m) => {
                    let _ = write!(x, "<failure type=\"{kind}\" message=\"{}\"/>", escape(m));
                }
                Verdict::Error(m) => {
                    let _ = write!(x, "<error type=\"simulation\" message=\"{}\"/>", escape(m));
                }
                Verdict::Skipped(m) => {
                    let _ = write!(x, "<skipped message=\"{}\"/>", escape(m));
                }
            }
            let _ = writeln!(x, "<system-out>{}</system-out></testcase>", escape(&c.out));
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_counts_add_up() {
        assert_eq!(escape("a<b & 'c' \"d\"\u{1}"), "a&lt;b &amp; &apos;c&apos; &quot;d&quot;");
        let cases = vec![
            Case { suite: "s".into(), name: "ok".into(), verdict: Verdict::Pass, out: String::new() },
            Case {
                suite: "s".into(),
                name: "m".into(),
                verdict: Verdict::Failure("moved", "+1 %".into()),
                out: String::new(),
            },
            Case {
                suite: "t".into(),
                name: "e".into(),
                verdict: Verdict::Error("dead<lock>".into()),
                out: String::new(),
            },
        ];
        let x = render("meshsim regress", &cases);
        assert!(
            x.contains(
                "<testsuites name=\"meshsim regress\" tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\">"
            ),
            "{x}"
        );
        assert!(x.contains("<testsuite name=\"s\" tests=\"2\" failures=\"1\" errors=\"0\""), "{x}");
        assert!(x.contains("message=\"dead&lt;lock&gt;\""), "{x}");
    }
}

//! Reports of any sweep: an aligned text table, CSV, or JSON, built from serialisable rows at
//! the edge. Columns are the rows' fields, in declaration order.

use serde::Serialize;

/// Output formats of benchmark reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An aligned text table.
    Text,
    /// Comma-separated values with a header line.
    Csv,
    /// A JSON array of objects.
    Json,
}

fn cells<R: Serialize>(rows: &[R]) -> (Vec<String>, Vec<Vec<String>>) {
    let values: Vec<serde_json::Map<String, serde_json::Value>> = rows
        .iter()
        .map(|r| match serde_json::to_value(r).expect("rows serialise") {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("rows are structs"),
        })
        .collect();
    let header: Vec<String> = values.first().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let body = values
        .iter()
        .map(|m| {
            m.values()
                .map(|v| match v {
                    serde_json::Value::Number(n) if n.is_f64() => format!("{:.2}", n.as_f64().unwrap_or(0.0)),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    (header, body)
}

/// Renders `rows` in `format`.
pub fn render<R: Serialize>(rows: &[R], format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(rows).expect("rows serialise") + "\n",
        Format::Csv => {
            let (header, body) = cells(rows);
            let mut out = header.join(",") + "\n";
            for r in body {
                out += &(r.join(",") + "\n");
            }
            out
        }
        Format::Text => {
            let (header, body) = cells(rows);
            let widths: Vec<usize> = (0..header.len())
                .map(|i| body.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
                .collect();
            let line = |cells: &[String]| {
                cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect::<Vec<_>>().join("  ")
                    + "\n"
            };
            let mut out = line(&header);
            for r in &body {
                out += &line(r);
            }
            out
        }
    }
}

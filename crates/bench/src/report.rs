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

/// A table cell: its text, and whether it is a number (numbers align right).
struct Cell {
    text: String,
    numeric: bool,
}

/// Header and cells of `rows`; floats get `decimals` places, or full precision when `None`.
fn cells<R: Serialize>(rows: &[R], decimals: Option<usize>) -> (Vec<String>, Vec<Vec<Cell>>) {
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
                    serde_json::Value::Number(n) if n.is_f64() => {
                        let x = n.as_f64().unwrap_or(0.0);
                        let text = match decimals {
                            Some(d) => format!("{x:.d$}"),
                            None => x.to_string(),
                        };
                        Cell { text, numeric: true }
                    }
                    serde_json::Value::Number(n) => Cell { text: n.to_string(), numeric: true },
                    serde_json::Value::String(s) => Cell { text: s.clone(), numeric: false },
                    serde_json::Value::Null => Cell { text: String::new(), numeric: false },
                    other => Cell { text: other.to_string(), numeric: false },
                })
                .collect()
        })
        .collect();
    (header, body)
}

/// Quotes a CSV field when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

/// Renders `rows` in `format`.
pub fn render<R: Serialize>(rows: &[R], format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(rows).expect("rows serialise") + "\n",
        Format::Csv => {
            let (header, body) = cells(rows, None);
            let mut out = header.iter().map(|h| csv_field(h)).collect::<Vec<_>>().join(",") + "\n";
            for r in body {
                out += &(r.iter().map(|c| csv_field(&c.text)).collect::<Vec<_>>().join(",") + "\n");
            }
            out
        }
        Format::Text => {
            let (header, body) = cells(rows, Some(2));
            let widths: Vec<usize> = (0..header.len())
                .map(|i| body.iter().map(|r| r[i].text.len()).chain([header[i].len()]).max().unwrap_or(0))
                .collect();
            let numeric: Vec<bool> = (0..header.len()).map(|i| body.iter().all(|r| r[i].numeric)).collect();
            let line = |cells: Vec<&str>| {
                let parts: Vec<String> = cells
                    .iter()
                    .zip(&widths)
                    .zip(&numeric)
                    .map(|((c, &w), &num)| if num { format!("{c:>w$}") } else { format!("{c:<w$}") })
                    .collect();
                parts.join("  ").trim_end().to_owned() + "\n"
            };
            let mut out = line(header.iter().map(String::as_str).collect());
            for r in &body {
                out += &line(r.iter().map(|c| c.text.as_str()).collect());
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        size_bytes: u64,
        gbps: f64,
        note: &'static str,
    }

    fn rows() -> Vec<Row> {
        vec![
            Row { size_bytes: 16, gbps: 0.2768, note: "small, slow" },
            Row { size_bytes: 8192, gbps: 12.0, note: "big" },
        ]
    }

    #[test]
    fn text_aligns_numbers_right_and_words_left() {
        assert_eq!(
            render(&rows(), Format::Text),
            "size_bytes   gbps  note\n        16   0.28  small, slow\n      8192  12.00  big\n"
        );
    }

    #[test]
    fn csv_keeps_full_precision_and_quotes_commas() {
        assert_eq!(
            render(&rows(), Format::Csv),
            "size_bytes,gbps,note\n16,0.2768,\"small, slow\"\n8192,12,big\n"
        );
    }

    #[test]
    fn json_is_an_array_of_objects_in_field_order() {
        let v: serde_json::Value = serde_json::from_str(&render(&rows(), Format::Json)).unwrap();
        assert_eq!(v[1]["gbps"], 12.0);
        assert!(
            render(&rows(), Format::Json).find("size_bytes") < render(&rows(), Format::Json).find("gbps")
        );
    }
}

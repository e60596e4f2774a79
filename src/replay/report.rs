//! Reading tt-metal's ops perf report (`ops_perf_results_*.csv`, written by tt-metal's
//! `process_ops_logs.py`; its layout in `shared/ops-report.md`): one [`Row`] per op per chip,
//! columns found by name, the 2026 layout (`INPUT_0_W_PAD[LOGICAL]`, `DEVICE ARCH`) and the 2025
//! one (plain `INPUT_0_W`, no architecture) alike.

use std::collections::BTreeMap;
use std::path::Path;

/// Which of tt-metal's layouts a report is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// 2026: padded[logical] shape columns, `DEVICE ARCH`, one global call count per op.
    Y2026,
    /// Before about September 2025: plain shape columns, no architecture, a call count per chip.
    Y2025,
}

impl Layout {
    /// Its name in outputs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Layout::Y2026 => "2026 layout",
            Layout::Y2025 => "2025 layout",
        }
    }
}

/// One tensor of a row: its per-chip padded shape (leading dims first), layout, type, memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tensor {
    /// W, Z, Y, X as padded.
    pub shape: [u64; 4],
    /// `TILE` or `ROW_MAJOR`.
    pub layout: String,
    /// `BFLOAT16`, `BFLOAT8_B`, ...
    pub dtype: String,
    /// `DEV_0_DRAM_INTERLEAVED`, ...
    pub memory: String,
}

/// One row of the report: an op on one chip.
#[derive(Clone, Debug, Default)]
pub(crate) struct Row {
    /// `OP CODE` as written.
    pub op_code: String,
    /// `OP TYPE`: `tt_dnn_device`, `signpost`, ...
    pub op_type: String,
    /// `GLOBAL CALL COUNT`.
    pub gcc: Option<u64>,
    /// `DEVICE ID`: the physical chip id.
    pub device: Option<u64>,
    /// `DEVICE ARCH`.
    pub arch: Option<String>,
    /// `ATTRIBUTES`, parsed.
    pub attrs: BTreeMap<String, String>,
    /// `DEVICE KERNEL DURATION [ns]`.
    pub kernel_ns: Option<f64>,
    /// The inputs and outputs present, in order.
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
    /// `METAL TRACE ID` and `METAL TRACE REPLAY SESSION ID`.
    pub trace_id: Option<u64>,
    pub session: Option<u64>,
    /// `PM IDEAL [ns]` (tt-metal's own estimate; `1` means none).
    pub pm_ideal_ns: Option<f64>,
}

/// A report: its layout and rows.
#[derive(Debug)]
pub(crate) struct Report {
    pub layout: Layout,
    pub rows: Vec<Row>,
    /// Rows left out, each with its line and why.
    pub warnings: Vec<String>,
}

/// Reads the report at `path`; a file that is not an ops report, or one that cannot be
/// replayed (device-only), is an error in one line.
pub(crate) fn read(path: &Path) -> Result<Report, String> {
    let here = path.display();
    let text = meshsim_topology::input::read_input_text(path).map_err(|e| format!("{here}: {e}"))?;
    parse(&text).map_err(|e| format!("{here}: {e}"))
}

/// The column indices a report's rows are read through.
struct Columns {
    op_code: usize,
    op_type: Option<usize>,
    gcc: Option<usize>,
    device: Option<usize>,
    arch: Option<usize>,
    attrs: usize,
    kernel: Option<usize>,
    trace: Option<usize>,
    session: Option<usize>,
    pm_ideal: Option<usize>,
    /// Per input and per output: W, Z, Y, X, layout, dtype, memory.
    inputs: Vec<[usize; 7]>,
    outputs: Vec<[usize; 7]>,
}

impl Columns {
    fn of(header: &csv::StringRecord) -> Result<(Columns, Layout), String> {
        if header.iter().all(|h| h.trim().is_empty()) {
            return Err("the file is empty: not an ops perf report".into());
        }
        let find = |name: &str| header.iter().position(|h| h.trim() == name);
        let op_code = find("OP CODE");
        let attrs = find("ATTRIBUTES");
        let (Some(op_code), Some(attrs)) = (op_code, attrs) else {
            return Err(
                "no OP CODE or ATTRIBUTES column: a device-only report (profiled without the host side) names no ops and cannot be replayed; profile with tt-metal's tracy tools (`python -m tracy -r -p ...`)".into(),
            );
        };
        let layout = if find("INPUT_0_W_PAD[LOGICAL]").is_some() || find("OUTPUT_0_W_PAD[LOGICAL]").is_some()
        {
            Layout::Y2026
        } else {
            Layout::Y2025
        };
        let tensor = |kind: &str, i: usize| -> Option<[usize; 7]> {
            let dim = |d: &str| match layout {
                Layout::Y2026 => find(&format!("{kind}_{i}_{d}_PAD[LOGICAL]")),
                Layout::Y2025 => find(&format!("{kind}_{i}_{d}")),
            };
            Some([
                dim("W")?,
                dim("Z")?,
                dim("Y")?,
                dim("X")?,
                find(&format!("{kind}_{i}_LAYOUT"))?,
                find(&format!("{kind}_{i}_DATATYPE"))?,
                find(&format!("{kind}_{i}_MEMORY"))?,
            ])
        };
        let blocks = |kind: &str| (0..).map_while(|i| tensor(kind, i)).collect::<Vec<_>>();
        let cols = Columns {
            op_code,
            op_type: find("OP TYPE"),
            gcc: find("GLOBAL CALL COUNT"),
            device: find("DEVICE ID"),
            arch: find("DEVICE ARCH"),
            attrs,
            kernel: find("DEVICE KERNEL DURATION [ns]"),
            trace: find("METAL TRACE ID"),
            session: find("METAL TRACE REPLAY SESSION ID"),
            pm_ideal: find("PM IDEAL [ns]"),
            inputs: blocks("INPUT"),
            outputs: blocks("OUTPUT"),
        };
        if cols.kernel.is_none() {
            return Err(
                "no DEVICE KERNEL DURATION [ns] column: the report has no measured kernel times".into()
            );
        }
        Ok((cols, layout))
    }
}

/// Parses a report's text. A row that cannot be read (a number that is not one, a broken CSV
/// record) is left out with a warning naming its line: one bad row does not lose the file.
pub(crate) fn parse(text: &str) -> Result<Report, String> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| format!("not a CSV file: {e}"))?.clone();
    let (cols, layout) = Columns::of(&header)?;
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        match record.map_err(|e| format!("line {line}: not CSV: {e}")).and_then(|r| row_of(&cols, &r, line)) {
            Ok(row) => rows.push(row),
            Err(e) => warnings.push(format!("{e} (row left out)")),
        }
    }
    Ok(Report { layout, rows, warnings })
}

/// One record as a row.
fn row_of(cols: &Columns, r: &csv::StringRecord, line: usize) -> Result<Row, String> {
    let cell =
        |c: Option<usize>| c.and_then(|c| r.get(c)).map(str::trim).filter(|s| !s.is_empty() && *s != "-");
    let number = |c: Option<usize>, what: &str| -> Result<Option<f64>, String> {
        cell(c)
            .map(|s| s.parse::<f64>().map_err(|_| format!("line {line}: {what} '{s}' is not a number")))
            .transpose()
    };
    let int = |c: Option<usize>, what: &str| -> Result<Option<u64>, String> {
        cell(c)
            .map(|s| s.parse::<u64>().map_err(|_| format!("line {line}: {what} '{s}' is not a whole number")))
            .transpose()
    };
    let op_type = cell(cols.op_type).unwrap_or("tt_dnn_device").to_owned();
    if op_type != "tt_dnn_device" {
        let op_code = cell(Some(cols.op_code)).unwrap_or("").to_owned();
        return Ok(Row { op_code, op_type, ..Row::default() });
    }
    let tensors = |blocks: &[[usize; 7]]| -> Result<Vec<Tensor>, String> {
        let mut v = Vec::new();
        for b in blocks {
            let Some(w) = cell(Some(b[0])) else { continue };
            let mut shape = [0u64; 4];
            for (d, s) in shape.iter_mut().enumerate() {
                let text = if d == 0 { w } else { cell(Some(b[d])).unwrap_or("1") };
                *s = padded(text).ok_or_else(|| format!("line {line}: shape '{text}' is not a size"))?;
            }
            v.push(Tensor {
                shape,
                layout: cell(Some(b[4])).unwrap_or("TILE").to_owned(),
                dtype: cell(Some(b[5])).unwrap_or("").to_owned(),
                memory: cell(Some(b[6])).unwrap_or("").to_owned(),
            });
        }
        Ok(v)
    };
    Ok(Row {
        op_code: cell(Some(cols.op_code)).unwrap_or("").to_owned(),
        gcc: int(cols.gcc, "GLOBAL CALL COUNT")?,
        device: int(cols.device, "DEVICE ID")?,
        arch: cell(cols.arch).map(str::to_owned),
        attrs: attributes(cell(Some(cols.attrs)).unwrap_or("")),
        kernel_ns: number(cols.kernel, "DEVICE KERNEL DURATION [ns]")?,
        inputs: tensors(&cols.inputs)?,
        outputs: tensors(&cols.outputs)?,
        trace_id: int(cols.trace, "METAL TRACE ID")?,
        session: int(cols.session, "METAL TRACE REPLAY SESSION ID")?,
        pm_ideal_ns: number(cols.pm_ideal, "PM IDEAL [ns]")?,
        op_type,
    })
}

/// A shape cell's padded size: `3200[3200]` (2026) or `3200` (2025).
fn padded(cell: &str) -> Option<u64> {
    cell.split('[').next()?.trim().parse().ok()
}

/// The `ATTRIBUTES` cell, a Python dict repr whose commas became `;`: `{'dim': '3'; 'topology':
/// 'Topology::Ring'; ...}`. A value holds `;`, brackets and quotes of its own, so it ends at the
/// first matching quote followed by `; '<identifier>': ` and a quote, or by the end.
pub(crate) fn attributes(cell: &str) -> BTreeMap<String, String> {
    let body = cell.trim().trim_start_matches('{').trim_end_matches('}');
    let mut out = BTreeMap::new();
    let mut rest = body;
    while let Some((key, quote, after)) = entry_start(rest) {
        let mut end = None;
        let mut from = 0;
        while let Some(j) = after[from..].find(quote).map(|j| from + j) {
            let tail = &after[j + 1..];
            if tail.trim().is_empty() || entry_start(tail.strip_prefix("; ").unwrap_or("x")).is_some() {
                end = Some(j);
                break;
            }
            from = j + 1;
        }
        let Some(end) = end else {
            out.insert(key.to_owned(), after.to_owned());
            break;
        };
        out.insert(key.to_owned(), after[..end].to_owned());
        rest = after[end + 1..].strip_prefix("; ").unwrap_or("");
    }
    out
}

/// `'key': '` at the start of `s`: the key, the value's quote, and what follows the quote.
fn entry_start(s: &str) -> Option<(&str, char, &str)> {
    let s = s.strip_prefix('\'')?;
    let close = s.find('\'')?;
    let key = &s[..close];
    let ident = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let after = s[close + 1..].strip_prefix(": ")?;
    let quote = after.chars().next().filter(|&c| c == '\'' || c == '"')?;
    ident.then_some((key, quote, &after[1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_keep_semicolons_brackets_and_quotes_inside_values() {
        let a = attributes(
            "{'barrier_semaphore': 'GlobalSemaphore(cores={[(x=0;y=0) - (x=7;y=7)]};buffer_type=BufferType::L1)'; 'dim': '3'; 'name': 'it's; 'x': 'y''; 'topology': 'Topology::Ring'}",
        );
        assert_eq!(
            a["barrier_semaphore"],
            "GlobalSemaphore(cores={[(x=0;y=0) - (x=7;y=7)]};buffer_type=BufferType::L1)"
        );
        assert_eq!(a["dim"], "3");
        assert_eq!(a["name"], "it's; 'x': 'y'");
        assert_eq!(a["topology"], "Topology::Ring");
        assert!(attributes("").is_empty());
    }

    #[test]
    fn both_layouts_read_their_shape_columns() {
        let new = "OP CODE,OP TYPE,GLOBAL CALL COUNT,DEVICE ID,DEVICE ARCH,ATTRIBUTES,DEVICE KERNEL DURATION [ns],INPUT_0_W_PAD[LOGICAL],INPUT_0_Z_PAD[LOGICAL],INPUT_0_Y_PAD[LOGICAL],INPUT_0_X_PAD[LOGICAL],INPUT_0_LAYOUT,INPUT_0_DATATYPE,INPUT_0_MEMORY\r\nX,tt_dnn_device,1025,1,blackhole,{'dim': '3'},1000,1[1],1[1],32[30],64[64],TILE,BFLOAT16,DEV_0_DRAM_INTERLEAVED\r\n";
        let r = parse(new).unwrap();
        assert_eq!(r.layout, Layout::Y2026);
        assert_eq!((r.rows[0].device, r.rows[0].gcc), (Some(1), Some(1025)));
        assert_eq!(r.rows[0].inputs[0].shape, [1, 1, 32, 64]);
        let old = "OP CODE,OP TYPE,GLOBAL CALL COUNT,DEVICE ID,ATTRIBUTES,DEVICE KERNEL DURATION [ns],INPUT_0_W,INPUT_0_Z,INPUT_0_Y,INPUT_0_X,INPUT_0_LAYOUT,INPUT_0_DATATYPE,INPUT_0_MEMORY\nX,tt_dnn_device,7,0,{},5,1,2,32,64,TILE,BFLOAT8_B,DEV_0_L1_INTERLEAVED\n";
        let r = parse(old).unwrap();
        assert_eq!(r.layout, Layout::Y2025);
        assert_eq!(r.rows[0].inputs[0].shape, [1, 2, 32, 64]);
        assert_eq!(r.rows[0].arch, None);
    }

    #[test]
    fn a_device_only_report_is_one_line_and_a_bad_row_a_warning() {
        let e = parse("DEVICE ID,DEVICE KERNEL DURATION [ns]\n0,5\n").unwrap_err();
        assert!(e.contains("device-only"), "{e}");
        let text = "OP CODE,OP TYPE,DEVICE ID,ATTRIBUTES,DEVICE KERNEL DURATION [ns]\nX,tt_dnn_device,0,{},fast\nX,tt_dnn_device,1,{},7\n";
        let r = parse(text).unwrap();
        assert_eq!(r.warnings, ["line 2: DEVICE KERNEL DURATION [ns] 'fast' is not a number (row left out)"]);
        assert_eq!((r.rows.len(), r.rows[0].device), (1, Some(1)));
    }
}

//! Plots of sweeps: one line per series against size on a log2 x axis, written as SVG or
//! PNG (chosen by the file extension). Text uses the embedded DejaVu Sans font, so nothing is
//! needed from the system.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

/// One line of a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// `(x, y)` points, x > 0.
    pub points: Vec<(f64, f64)>,
}

/// What to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    /// Caption.
    pub title: String,
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// The lines.
    pub series: Vec<Series>,
    /// A log10 y axis (ticks labelled with the values), for quantities spanning decades such
    /// as times from microseconds to tens of milliseconds; y must then be > 0.
    pub log_y: bool,
}

/// A plot that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The extension is neither `.svg` nor `.png`.
    #[error("{0}: plots are written as .svg or .png")]
    Extension(String),
    /// Nothing to draw.
    #[error("{0}: no points to plot")]
    Empty(String),
    /// The drawing backend failed (for example the file could not be written).
    #[error("{0}: {1}")]
    Draw(String, String),
}

/// Byte sizes as people write them: 16, 512, 1K, 8K, 1M.
pub fn human_bytes(x: f64) -> String {
    let v = x.round() as u64;
    match v {
        v if v >= 1 << 30 && v % (1 << 30) == 0 => format!("{}G", v >> 30),
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Registration only fails for a malformed font, and this one is fixed at build time.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Checks, before anything is simulated, that a plot can be written to `path`: an `.svg` or
/// `.png` name in a directory that exists.
pub fn check_path(path: &Path) -> Result<(), PlotError> {
    let name = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    if ext != "svg" && ext != "png" {
        return Err(PlotError::Extension(name));
    }
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            Err(PlotError::Draw(name, format!("directory {} does not exist", dir.display())))
        }
        _ => writable(path).map_err(|e| PlotError::Draw(name, format!("cannot write: {e}"))),
    }
}

/// Whether `path` can be written, found by opening it for writing (without truncating it); a
/// file that did not exist is removed again.
pub fn writable(path: &Path) -> std::io::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    if !existed {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// Writes `plot` to `path` (`.svg` or `.png`).
pub fn write(path: &Path, plot: &Plot) -> Result<(), PlotError> {
    let name = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let points =
        plot.series.iter().flat_map(|s| &s.points).filter(|p| p.0 > 0.0 && (!plot.log_y || p.1 > 0.0));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, 0f64);
    for &(x, y) in points {
        x0 = x0.min(x.log2().floor());
        x1 = x1.max(x.log2().ceil());
        let y = if plot.log_y { y.log10() } else { y };
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x1 < x0 {
        return Err(PlotError::Empty(name));
    }
    register_font();
    let draw_err = |e: String| PlotError::Draw(name.clone(), e);
    let size = (900, 560);
    // A linear axis starts at 0; a log one spans the decades the points touch.
    let ys =
        if plot.log_y { (y0.floor(), y1.ceil().max(y0.floor() + 1.0)) } else { (0.0, (y1 * 1.1).max(1e-9)) };
    let xs = (x0, x1.max(x0 + 1.0));
    match ext.as_str() {
        "svg" => draw(SVGBackend::new(path, size).into_drawing_area(), plot, xs, ys).map_err(draw_err),
        "png" => draw(BitMapBackend::new(path, size).into_drawing_area(), plot, xs, ys).map_err(draw_err),
        _ => Err(PlotError::Extension(name)),
    }
}

/// Draws with x in log2 space: ticks on whole powers of two, labelled as sizes; y in log10
/// space when the plot asks for it, ticks labelled with the values.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    plot: &Plot,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    let y_of = |y: f64| if plot.log_y { y.log10() } else { y };
    let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&plot.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(&plot.x_desc)
        .y_desc(&plot.y_desc)
        .x_labels((x1 - x0) as usize + 1)
        .x_label_formatter(&|x| if x.fract() == 0.0 { human_bytes(x.exp2()) } else { String::new() })
        .y_label_formatter(&|y| if plot.log_y { format!("{}", 10f64.powf(*y)) } else { format!("{y}") })
        .y_labels(if plot.log_y { (y1 - y0) as usize + 1 } else { 10 })
        .draw()
        .map_err(e)?;
    for (i, s) in plot.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|&(x, y)| (x.log2(), y_of(y))),
                color.stroke_width(2),
            ))
            .map_err(e)?
            .label(&s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&(x, y)| Circle::new((x.log2(), y_of(y)), 3, color.filled())))
            .map_err(e)?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_people_write_them() {
        let got: Vec<String> =
            [16.0, 1536.0, 1024.0, 8192.0, 1048576.0].iter().map(|&x| human_bytes(x)).collect();
        assert_eq!(got, ["16", "1536", "1K", "8K", "1M"]);
    }

    #[test]
    fn svg_and_png_are_written_and_other_extensions_refused() {
        let dir = std::env::temp_dir().join(format!("meshsim-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plot = Plot {
            title: "t".into(),
            x_desc: "size".into(),
            y_desc: "GB/s".into(),
            series: vec![Series { label: "n300".into(), points: vec![(16.0, 0.3), (8192.0, 12.0)] }],
            log_y: false,
        };
        write(&dir.join("a.svg"), &plot).unwrap();
        let svg = std::fs::read_to_string(dir.join("a.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("\nn300\n") && svg.contains("\n8K\n"), "{svg}");
        write(&dir.join("a.png"), &plot).unwrap();
        assert_eq!(&std::fs::read(dir.join("a.png")).unwrap()[1..4], b"PNG");
        assert!(matches!(write(&dir.join("a.jpg"), &plot), Err(PlotError::Extension(_))));
    }
}

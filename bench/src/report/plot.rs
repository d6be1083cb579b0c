//! PNG line plots with plotters, using an embedded DejaVu Sans font so that
//! no system font library is needed.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::{BenchError, Result};

/// One line of a plot.
pub struct Line {
    pub name: String,
    /// Drawn thicker (the Trust<T> variants).
    pub emphasis: bool,
    pub points: Vec<(f64, f64)>,
}

/// Line colours (the "tab10" palette: distinct, readable on white).
const COLORS: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
            plotters::style::register_font("sans-serif", style, bytes)
                .unwrap_or_else(|_| panic!("embedded font is valid"));
        }
    });
}

fn err<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Other(format!("plot: {e}"))
}

/// Axis range covering `v`, padded; positive when logarithmic.
fn range(v: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) =
        v.filter(|x| x.is_finite() && (!log || *x > 0.0)).fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    if lo > hi {
        (lo, hi) = (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0), hi + pad)
    }
}

/// Draws `lines` into a 1100×700 PNG at `path`.
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    log_x: bool,
    y_label: &str,
    log_y: bool,
    lines: &[Line],
) -> Result<()> {
    register_font();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = BitMapBackend::new(path, (1100, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let xr = range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), log_x);
    let yr = range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)), log_y);
    let mut builder = ChartBuilder::on(&root);
    builder.caption(title, ("sans-serif", 24)).margin(16).x_label_area_size(48).y_label_area_size(70);
    // Four axis combinations, four chart types: one macro body.
    macro_rules! draw {
        ($x:expr, $y:expr) => {{
            let mut chart = builder.build_cartesian_2d($x, $y).map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .label_style(("sans-serif", 15))
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .draw()
                .map_err(err)?;
            for (i, l) in lines.iter().enumerate() {
                let color = COLORS[i % COLORS.len()].to_rgba();
                let width = if l.emphasis { 3 } else { 1 };
                let pts: Vec<(f64, f64)> =
                    l.points.iter().copied().filter(|p| (!log_x || p.0 > 0.0) && (!log_y || p.1 > 0.0)).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))
                    .map_err(err)?
                    .label(l.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width)));
                if l.emphasis {
                    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(err)?;
                } else {
                    chart.draw_series(pts.iter().map(|&p| Cross::new(p, 4, color))).map_err(err)?;
                }
            }
            chart
                .configure_series_labels()
                // Latency curves shoot up on the right; throughput curves fall there.
                .position(if log_y { SeriesLabelPosition::UpperLeft } else { SeriesLabelPosition::UpperRight })
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 15))
                .draw()
                .map_err(err)?;
        }};
    }
    match (log_x, log_y) {
        (true, true) => draw!((xr.0..xr.1).log_scale(), (yr.0..yr.1).log_scale()),
        (true, false) => draw!((xr.0..xr.1).log_scale(), yr.0..yr.1),
        (false, true) => draw!(xr.0..xr.1, (yr.0..yr.1).log_scale()),
        (false, false) => draw!(xr.0..xr.1, yr.0..yr.1),
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Compact tick labels: 1k, 10M, 0.5.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

//! Charts, as SVG (plotters) and PNG (the SVG rasterized by resvg with a bundled font, so no
//! system fonts are needed): throughput vs average read latency per thread count, p99/p99.9
//! latency bars, and throughput over time.

use crate::report::{groups, median_run};
use crate::results::{parse_workload_label, RunResult, SuiteReport};
use anyhow::{Context, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Arc;

const SIZE: (u32, u32) = (900, 560);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The operation whose latency a chart of this run shows: reads when there are any.
fn main_operation(run: &RunResult) -> Option<&str> {
    [
        "READ",
        "SCAN",
        "UPDATE",
        "INSERT",
        "WRITE",
        "READ-MODIFY-WRITE",
    ]
    .into_iter()
    .find(|operation| run.latency_us.contains_key(*operation))
}

fn save(svg: &str, out: &Path, name: &str) -> Result<()> {
    std::fs::write(out.join(format!("{name}.svg")), svg)?;
    let mut fonts = resvg::usvg::fontdb::Database::new();
    fonts.load_font_data(epaint_default_fonts::UBUNTU_LIGHT.to_vec());
    fonts.set_sans_serif_family("Ubuntu");
    let options = resvg::usvg::Options {
        fontdb: Arc::new(fonts),
        ..resvg::usvg::Options::default()
    };
    let tree = resvg::usvg::Tree::from_str(svg, &options).context("parsing the chart SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).context("allocating the PNG")?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .save_png(out.join(format!("{name}.png")))
        .context("writing the PNG")?;
    Ok(())
}

fn engines(runs: &[&RunResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for run in runs {
        if !names.contains(&run.engine) {
            names.push(run.engine.clone());
        }
    }
    names
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Renders one SVG chart: a white canvas of SIZE, painted by `paint`.
fn render(
    title: &str,
    paint: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let painted = (|| -> DrawResult {
            root.fill(&WHITE)?;
            paint(&root)?;
            root.present()?;
            Ok(())
        })();
        painted.map_err(|error| anyhow::anyhow!("drawing {title}: {error}"))?;
    }
    Ok(svg)
}

type XyChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Axes from 0 to 15% past the largest point, with their descriptions, under `title`.
fn xy_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    (x_max, y_max): (f64, f64),
    (x_desc, y_desc): (&str, &str),
) -> Result<XyChart<'a, 'b>, Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max * 1.15, 0.0..y_max * 1.15)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    Ok(chart)
}

/// The series' names in a framed box.
fn draw_legend<'a, 'b: 'a>(chart: &mut XyChart<'a, 'b>) -> DrawResult {
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    Ok(())
}

/// One point of a throughput/latency curve: (ops/s, average latency µs, thread count).
type CurvePoint = (f64, f64, usize);

fn throughput_vs_latency(title: &str, series: &[(String, Vec<CurvePoint>)]) -> Result<String> {
    render(title, |root| {
        let points = series.iter().flat_map(|(_, points)| points.iter());
        let x_max = points.clone().map(|point| point.0).fold(1.0, f64::max);
        let y_max = points.map(|point| point.1).fold(1.0, f64::max);
        let mut chart = xy_chart(
            root,
            title,
            (x_max, y_max),
            ("throughput (ops/s)", "average latency (µs)"),
        )?;
        for (index, (engine, points)) in series.iter().enumerate() {
            let style = color(index);
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|point| (point.0, point.1)),
                    style.stroke_width(2),
                ))?
                .label(engine.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], style.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|point| {
                EmptyElement::at((point.0, point.1))
                    + Circle::new((0, 0), 4, style.filled())
                    + Text::new(format!("{}t", point.2), (6, -14), ("sans-serif", 13))
            }))?;
        }
        draw_legend(&mut chart)
    })
}

/// One point of a latency-at-offered-load curve: (achieved ops/s, p99 µs, p99.9 µs).
type LoadPoint = (f64, f64, f64);

fn latency_at_offered_load(title: &str, series: &[(String, Vec<LoadPoint>)]) -> Result<String> {
    render(title, |root| {
        let points = series.iter().flat_map(|(_, points)| points.iter());
        let x_max = points.clone().map(|point| point.0).fold(1.0, f64::max);
        let y_max = points.map(|point| point.2.max(point.1)).fold(1.0, f64::max);
        let mut chart = xy_chart(
            root,
            title,
            (x_max, y_max),
            (
                "achieved throughput (ops/s)",
                "latency (µs): p99 filled, p99.9 hollow",
            ),
        )?;
        for (index, (engine, points)) in series.iter().enumerate() {
            let style = color(index);
            for (quantile, filled) in [(1, true), (2, false)] {
                let at =
                    |point: &LoadPoint| (point.0, if quantile == 1 { point.1 } else { point.2 });
                let line = chart.draw_series(LineSeries::new(
                    points.iter().map(at),
                    style.stroke_width(if filled { 2 } else { 1 }),
                ))?;
                if filled {
                    line.label(engine.as_str()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], style.stroke_width(2))
                    });
                }
                chart.draw_series(points.iter().map(|point| {
                    let marker = if filled {
                        style.filled()
                    } else {
                        style.stroke_width(1)
                    };
                    Circle::new(at(point), 4, marker)
                }))?;
            }
        }
        draw_legend(&mut chart)
    })
}

fn tail_latency_bars(title: &str, bars: &[(String, f64, f64)]) -> Result<String> {
    render(title, |root| {
        let y_max = bars.iter().map(|bar| bar.2.max(bar.1)).fold(1.0, f64::max) * 1.2;
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(60)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..bars.len() as f64, 0.0..y_max)?;
        let labels: Vec<String> = bars.iter().map(|bar| bar.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len().max(1))
            .x_label_formatter(&|x| labels.get(x.floor() as usize).cloned().unwrap_or_default())
            .y_desc("latency (µs)")
            .draw()?;
        for (series, (name, pick)) in [("p99", 0usize), ("p99.9", 1usize)].into_iter().enumerate() {
            let style = color(series);
            chart
                .draw_series(bars.iter().enumerate().map(|(index, bar)| {
                    let value = if pick == 0 { bar.1 } else { bar.2 };
                    let left = index as f64 + 0.1 + 0.4 * series as f64;
                    Rectangle::new([(left, 0.0), (left + 0.38, value)], style.filled())
                }))?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 15, y + 5)], style.filled())
                });
        }
        draw_legend(&mut chart)
    })
}

fn timeline(title: &str, series: &[(String, Vec<u64>)]) -> Result<String> {
    render(title, |root| {
        let x_max = series
            .iter()
            .map(|(_, points)| points.len())
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let y_max = series
            .iter()
            .flat_map(|(_, points)| points.iter())
            .copied()
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.15;
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc("second")
            .y_desc("ops in that second")
            .draw()?;
        for (index, (engine, points)) in series.iter().enumerate() {
            let style = color(index);
            chart
                .draw_series(LineSeries::new(
                    points
                        .iter()
                        .enumerate()
                        .map(|(second, &ops)| (second as f64 + 1.0, ops as f64)),
                    style.stroke_width(2),
                ))?
                .label(engine.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], style.stroke_width(2))
                });
        }
        draw_legend(&mut chart)
    })
}

/// Writes every chart of `report` into `out`.
pub fn write_all(report: &SuiteReport, out: &Path) -> Result<()> {
    let suite = report.params["suite"]
        .as_str()
        .unwrap_or("suite")
        .to_string();
    let groups = groups(report);
    let mut workloads: Vec<String> = Vec::new();
    for ((workload, _), _) in &groups {
        if !workloads.contains(workload) {
            workloads.push(workload.clone());
        }
    }
    for workload in workloads {
        let runs: Vec<&RunResult> = groups
            .iter()
            .filter(|((name, _), _)| name == &workload)
            .flat_map(|(_, runs)| runs.iter().copied())
            .collect();
        let engine_names = engines(&runs);
        let mut thread_counts: Vec<usize> = runs.iter().map(|run| run.threads).collect();
        thread_counts.sort_unstable();
        thread_counts.dedup();
        let mut curve = Vec::new();
        let mut bars = Vec::new();
        let mut lines = Vec::new();
        let top_threads = *thread_counts.last().unwrap_or(&1);
        for engine in &engine_names {
            let mut points = Vec::new();
            for &threads in &thread_counts {
                let at: Vec<&RunResult> = runs
                    .iter()
                    .copied()
                    .filter(|run| run.threads == threads)
                    .collect();
                if let Some(run) = median_run(&at, engine) {
                    if let Some(operation) = main_operation(run) {
                        points.push((run.ops_per_sec, run.latency_us[operation].avg, threads));
                    }
                    if threads == top_threads {
                        for (operation, latency) in &run.latency_us {
                            bars.push((
                                format!("{engine} {operation}"),
                                latency.p99 as f64,
                                latency.p999 as f64,
                            ));
                        }
                        if run.timeline.len() >= 2 {
                            lines.push((engine.clone(), run.timeline.clone()));
                        }
                    }
                }
            }
            curve.push((engine.clone(), points));
        }
        let base = format!("{suite}-{workload}").replace([' ', '/'], "-");
        save(
            &throughput_vs_latency(
                &format!("{suite} {workload}: throughput vs average latency"),
                &curve,
            )?,
            out,
            &format!("{base}-throughput-latency"),
        )?;
        save(
            &tail_latency_bars(
                &format!("{suite} {workload}: tail latency at {top_threads} threads"),
                &bars,
            )?,
            out,
            &format!("{base}-tail-latency"),
        )?;
        save(
            &timeline(
                &format!("{suite} {workload}: throughput over time at {top_threads} threads"),
                &lines,
            )?,
            out,
            &format!("{base}-timeline"),
        )?;
    }
    write_offered_load_charts(&suite, &groups, out)
}

/// For each workload run at several offered loads (`--target` sweeps), p99 and p99.9 of its main
/// operation against the throughput achieved, one curve per engine: latency at equal offered
/// load, where comparing p99.9 at each engine's own peak throughput would not be fair.
fn write_offered_load_charts(
    suite: &str,
    groups: &[((String, usize), Vec<&RunResult>)],
    out: &Path,
) -> Result<()> {
    let mut swept: Vec<(String, usize)> = Vec::new();
    for ((label, threads), _) in groups {
        let (name, target) = parse_workload_label(label);
        if target.is_some() && !swept.contains(&(name.to_owned(), *threads)) {
            swept.push((name.to_owned(), *threads));
        }
    }
    for (name, threads) in swept {
        let at_loads: Vec<&Vec<&RunResult>> = groups
            .iter()
            .filter(|((label, group_threads), _)| {
                parse_workload_label(label).0 == name && *group_threads == threads
            })
            .map(|(_, runs)| runs)
            .collect();
        let all: Vec<&RunResult> = at_loads
            .iter()
            .flat_map(|runs| runs.iter().copied())
            .collect();
        let mut series = Vec::new();
        for engine in engines(&all) {
            let mut points: Vec<LoadPoint> = at_loads
                .iter()
                .filter_map(|runs| {
                    let run = median_run(runs, &engine)?;
                    let latency = &run.latency_us[main_operation(run)?];
                    Some((run.ops_per_sec, latency.p99 as f64, latency.p999 as f64))
                })
                .collect();
            points.sort_by(|left, right| left.0.total_cmp(&right.0));
            series.push((engine, points));
        }
        save(
            &latency_at_offered_load(
                &format!("{suite} {name}: tail latency at equal offered load, {threads} threads"),
                &series,
            )?,
            out,
            &format!("{suite}-{name}-t{threads}-offered-load"),
        )?;
    }
    Ok(())
}

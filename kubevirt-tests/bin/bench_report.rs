//! Writes criterion results into one section of BENCHMARKS.md, leaving the other sections as they
//! are. Each benchmark is `id:target_ns`; the median comes from
//! `target/criterion/<id>/new/estimates.json`.
//!
//! bench-report --section render --title "..." --bench render_minimal_vmi:20000 [--bench ...]
//! bench-report --section migration --body-file target/bench-migration.md
//!
//! With `--body-file`, the section is that file's markdown, as a benchmark program that cannot
//! write BENCHMARKS.md itself wrote it (a `cargo bench` target of another crate).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

struct Args {
    section: String,
    title: String,
    benches: Vec<(String, f64)>,
    criterion_dir: PathBuf,
    output: PathBuf,
    body_file: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        section: String::new(),
        title: String::new(),
        benches: Vec::new(),
        criterion_dir: PathBuf::from("target/criterion"),
        output: PathBuf::from("BENCHMARKS.md"),
        body_file: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--section" => args.section = value,
            "--title" => args.title = value,
            "--criterion-dir" => args.criterion_dir = value.into(),
            "--output" => args.output = value.into(),
            "--body-file" => args.body_file = Some(value.into()),
            "--bench" => {
                let (id, target) = value
                    .split_once(':')
                    .with_context(|| format!("--bench {value}: expected id:target_ns"))?;
                args.benches.push((
                    id.to_owned(),
                    target.parse().with_context(|| format!("--bench {value}: bad target"))?,
                ));
            }
            other => bail!("unknown flag {other}"),
        }
    }
    if args.section.is_empty() || (args.benches.is_empty() && args.body_file.is_none()) {
        bail!("usage: bench-report --section NAME --title TEXT --bench ID:TARGET_NS ...");
    }
    Ok(args)
}

fn median_ns(dir: &Path, id: &str) -> anyhow::Result<f64> {
    let path = dir.join(id).join("new/estimates.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    value["median"]["point_estimate"]
        .as_f64()
        .with_context(|| format!("{}: no median", path.display()))
}

fn human(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The section from criterion's medians of `args.benches`.
fn criterion_body(args: &Args) -> anyhow::Result<String> {
    let mut body = format!(
        "## {}\n\nMachine: {}. Medians from criterion (release build).\n\n",
        args.title,
        kubevirt_tests::machine_description()
    );
    body.push_str("| benchmark | median | target | met |\n|---|---|---|---|\n");
    for (id, target) in &args.benches {
        let median = median_ns(&args.criterion_dir, id)?;
        let met = if median <= *target { "yes" } else { "**no**" };
        let _ = writeln!(body, "| `{id}` | {} | ≤ {} | {met} |", human(median), human(*target));
    }
    Ok(body)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let body = match &args.body_file {
        Some(file) => std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?,
        None => criterion_body(&args)?,
    };
    kubevirt_tests::replace_markdown_section(&args.output, &args.section, &body)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    println!(
        "bench-report: updated section {} of {}",
        args.section,
        args.output.display()
    );
    Ok(())
}

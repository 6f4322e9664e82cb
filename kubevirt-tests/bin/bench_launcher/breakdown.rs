//! Where a launcher start's time goes: one extra run with the launcher's debug log and libvirt's
//! `qemu_process` debug log (light: a few dozen lines), whose timestamps split the start into
//! phases from the launcher's exec to the guest's marker.

use std::fmt::Write as _;
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, bail};

/// Log lines that end each phase, found in the launcher's log (`L`) or libvirtd's (`V`).
const PHASES: [(&str, Source, &str); 8] = [
    (
        "launcher start-up: manifest, volumes, libvirt configuration",
        Source::Launcher,
        "started daemon=\"libvirtd\"",
    ),
    (
        "libvirtd start-up until it answers a connection (its drivers initialised)",
        Source::Launcher,
        "libvirtd serves",
    ),
    (
        "the launcher's own connection",
        Source::Launcher,
        "connected to the private libvirt",
    ),
    (
        "define (libvirt loads, or probes, the QEMU capabilities)",
        Source::Launcher,
        "domain defined",
    ),
    (
        "libvirt prepares and executes QEMU",
        Source::Libvirt,
        "running with pid=",
    ),
    (
        "QEMU start-up until its monitor answers",
        Source::Libvirt,
        "Verifying and updating provided guest CPU",
    ),
    (
        "libvirt reads the guest CPU back, one QMP `qom-get` per feature",
        Source::Libvirt,
        "Detecting IOThread PIDs",
    ),
    (
        "the rest of libvirt's start, `cont`",
        Source::Launcher,
        "domain started",
    ),
];

#[derive(Clone, Copy)]
enum Source {
    Launcher,
    Libvirt,
}

/// One instrumented run: when it was spawned, its logs, and the marker.
pub struct Timeline {
    /// The launcher's exec, in seconds since the epoch.
    pub spawned: f64,
    /// The marker line, in seconds since the epoch.
    pub marker: f64,
    /// The guest's uptime at the marker.
    pub guest_uptime: f64,
    /// The launcher's stderr.
    pub launcher_log: String,
    /// libvirtd's log file.
    pub libvirt_log: String,
}

/// Seconds since the epoch.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The environment of an instrumented run: the launcher logs at debug level, libvirtd writes its
/// QEMU-process log to `libvirt_log`.
pub fn environment(libvirt_log: &Path) -> Vec<(String, String)> {
    vec![
        ("VIRT_LAUNCHER_LOG".into(), "warn,virt_launcher=debug".into()),
        ("NO_COLOR".into(), "1".into()),
        ("LIBVIRT_LOG_FILTERS".into(), "1:qemu.qemu_process".into()),
        (
            "LIBVIRT_LOG_OUTPUTS".into(),
            format!("1:file:{}", libvirt_log.display()),
        ),
    ]
}

/// The phases of `timeline`, each with its length in seconds, ending with the guest's.
pub fn phases(timeline: &Timeline) -> anyhow::Result<Vec<(String, f64)>> {
    let launcher_log = strip_colours(&timeline.launcher_log);
    let mut rows = Vec::new();
    let mut previous = timeline.spawned;
    for (name, source, needle) in PHASES {
        let at = match source {
            Source::Launcher => first_time(&launcher_log, needle, launcher_time),
            Source::Libvirt => first_time(&timeline.libvirt_log, needle, libvirt_time),
        }
        .with_context(|| format!("no log line with {needle:?}"))?;
        if at < previous {
            bail!("the log line with {needle:?} comes before the phase it ends began");
        }
        rows.push((name.to_owned(), at - previous));
        previous = at;
    }
    let kernel = timeline.marker - timeline.guest_uptime;
    if kernel < previous {
        bail!("the guest's uptime puts its start before the domain's");
    }
    rows.push((
        "domain running until the guest kernel starts (firmware, kernel load)".to_owned(),
        kernel - previous,
    ));
    rows.push(("the guest's own boot, to its marker".to_owned(), timeline.guest_uptime));
    Ok(rows)
}

/// The phases of a warm and a cold start side by side, in milliseconds.
pub fn table(warm: &[(String, f64)], cold: &[(String, f64)], raw_host: f64) -> String {
    let mut text = String::from(
        "\n**Where a start's time goes** (one more warm and one more cold start of the matched \
         manifest, with the launcher's debug log and libvirt's `qemu_process` log; raw QEMU's \
         host-side time, its own start-up, firmware and kernel load, compares with the QEMU \
         start-up, firmware and kernel-load rows)\n\n| phase | warm | cold |\n|---|---|---|\n",
    );
    let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
    for ((name, warm), (_, cold)) in warm.iter().zip(cold) {
        let _ = writeln!(text, "| {name} | {} | {} |", ms(*warm), ms(*cold));
    }
    let total = |phases: &[(String, f64)]| phases.iter().map(|(_, s)| s).sum::<f64>();
    let _ = writeln!(
        text,
        "| **launcher start to marker** | **{}** | **{}** |\n| raw QEMU's host-side time, for comparison | {} | |",
        ms(total(warm)),
        ms(total(cold)),
        ms(raw_host)
    );
    text
}

fn first_time(log: &str, needle: &str, parse: fn(&str) -> Option<f64>) -> Option<f64> {
    log.lines().filter(|l| l.contains(needle)).find_map(parse)
}

/// `text` without ANSI colour sequences (`ESC [ ... m`).
fn strip_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `2026-11-26T04:18:08.209928Z  INFO ...` (tracing's format).
fn launcher_time(line: &str) -> Option<f64> {
    let stamp = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = stamp.split_once('T')?;
    epoch_seconds(date, time)
}

/// `2026-11-26 04:18:08.258+0000: 123: debug : ...` (libvirt's format).
fn libvirt_time(line: &str) -> Option<f64> {
    let mut parts = line.split_whitespace();
    let date = parts.next()?;
    let time = parts.next()?.strip_suffix("+0000:")?;
    epoch_seconds(date, time)
}

fn epoch_seconds(date: &str, time: &str) -> Option<f64> {
    let mut ymd = date.split('-').map(str::parse::<i64>);
    let (year, month, day) = (ymd.next()?.ok()?, ymd.next()?.ok()?, ymd.next()?.ok()?);
    let mut hms = time.split(':');
    let hours: f64 = hms.next()?.parse().ok()?;
    let minutes: f64 = hms.next()?.parse().ok()?;
    let seconds: f64 = hms.next()?.parse().ok()?;
    #[allow(clippy::cast_precision_loss, reason = "days since 1970 are far below 2^52")]
    let days = days_from_civil(year, month, day) as f64;
    Some(days * 86_400.0 + hours * 3600.0 + minutes * 60.0 + seconds)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_log_formats_give_seconds_since_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        let launcher = launcher_time("2026-11-26T04:18:08.209928Z  INFO x: started").expect("launcher");
        let libvirt = libvirt_time("2026-11-26 04:18:08.258+0000: 10: debug : f:1 : x").expect("libvirt");
        assert!((libvirt - launcher - 0.048_072).abs() < 1e-6, "{}", libvirt - launcher);
        assert!((launcher - 1_795_666_688.209_928).abs() < 1e-3, "{launcher}");
        assert_eq!(
            strip_colours("\u{1b}[2mtime\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m x"),
            "time  INFO x"
        );
    }
}

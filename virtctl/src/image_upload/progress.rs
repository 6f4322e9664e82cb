//! The upload's progress bar, as upstream's (`pb.Full` with byte counters): bytes sent of the
//! whole, a bar, the percentage, the speed and the time left, redrawn in place.

use std::io::Write;
use std::time::{Duration, Instant};

/// How often the bar is redrawn.
const REDRAW: Duration = Duration::from_millis(200);
/// The bar's width in characters.
const WIDTH: usize = 40;

/// `bytes` as upstream's counters show them (`1.50 MiB`).
#[must_use]
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    #[expect(clippy::cast_precision_loss, reason = "a size shown with two decimals")]
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// One line of the bar for `sent` of `total` bytes after `elapsed`.
#[must_use]
pub fn line(sent: u64, total: u64, elapsed: Duration) -> String {
    #[expect(clippy::cast_precision_loss, reason = "a share shown with two decimals")]
    let share = if total == 0 { 1.0 } else { sent as f64 / total as f64 };
    let share = share.clamp(0.0, 1.0);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a share of the bar's width"
    )]
    let filled = ((share * WIDTH as f64) as usize).min(WIDTH);
    let bar = if filled == WIDTH {
        "=".repeat(WIDTH)
    } else {
        format!("{}>{}", "=".repeat(filled), "-".repeat(WIDTH - filled - 1))
    };
    let seconds = elapsed.as_secs_f64();
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a rate and a time shown rounded"
    )]
    let (speed, left) = if seconds > 0.0 && sent > 0 {
        let rate = sent as f64 / seconds;
        (rate as u64, ((total.saturating_sub(sent)) as f64 / rate).ceil() as u64)
    } else {
        (0, 0)
    };
    format!(
        "{} / {} [{bar}] {:.2}% {}/s ETA {left}s",
        human(sent),
        human(total),
        share * 100.0,
        human(speed)
    )
}

/// A bar drawn on a terminal or a log.
#[derive(Debug)]
pub struct Bar {
    total: u64,
    begin: Instant,
    drawn: Option<Instant>,
}

impl Bar {
    /// A bar for `total` bytes, started now.
    #[must_use]
    pub fn new(total: u64) -> Self {
        Self {
            total,
            begin: Instant::now(),
            drawn: None,
        }
    }

    /// Starts again from nothing (a new attempt).
    pub fn restart(&mut self) {
        self.begin = Instant::now();
        self.drawn = None;
    }

    /// Shows `sent` bytes, at most every [`REDRAW`] unless `now` (the end).
    pub fn show(&mut self, sent: u64, now: bool) {
        if !now && self.drawn.is_some_and(|at| at.elapsed() < REDRAW) {
            return;
        }
        self.drawn = Some(Instant::now());
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\r{}", line(sent, self.total, self.begin.elapsed()));
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_line_shows_counters_bar_share_speed_and_time_left() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536 * 1024), "1.50 MiB");
        let half = line(1 << 20, 2 << 20, Duration::from_secs(1));
        assert_eq!(
            half,
            format!(
                "1.00 MiB / 2.00 MiB [{}>{}] 50.00% 1.00 MiB/s ETA 1s",
                "=".repeat(20),
                "-".repeat(19)
            )
        );
        let done = line(2 << 20, 2 << 20, Duration::from_secs(2));
        assert!(done.contains(&format!("[{}] 100.00%", "=".repeat(40))), "{done}");
        assert!(
            line(0, 0, Duration::ZERO).contains("100.00%"),
            "an empty file is all sent"
        );
    }
}

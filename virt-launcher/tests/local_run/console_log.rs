//! The serial console's log stays bounded (#31): a guest that floods its console leaves the log and
//! its backups within virtlogd's limits (2 MiB a file, three backups), and the console the launcher
//! streams still shows the guest's newest lines. 12 MiB rotate the log five times and drop the
//! oldest backups twice; an emulated serial port under TCG moves about 0.2 MiB/s here (and a tenth
//! of that on a busy CI machine), so the 100 MiB of the issue took 495 s when measured once
//! (largest file 2.06 MiB, all four 8.2 MiB), too long for every run of the suite.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use virt_launcher::supervisor::log_rotation::{MAX_BACKUPS, MAX_SIZE, backup};

use super::harness::{Launcher, require_test_guest, serial, testguest_replacing};
use super::{BOOT_TIMEOUT, stop_gracefully};

const FLOOD_MIB: u64 = 12;
/// What the guest writes once the flood is over.
const FLOOD_DONE: &[u8] = b"KUBEVIRT-RS-FLOOD-DONE";
/// The flood has no deadline, since its speed is the emulated UART's under TCG, which a busy or
/// throttled machine slows tenfold (60 s here, 159 s and more than 600 s on CI machines). It fails
/// when the logs stop changing for this long, which only a stuck guest or console does.
const STALL_TIMEOUT: Duration = Duration::from_secs(180);
/// How much of the log's end is read to look for the flood's last line (reading and scanning the
/// whole 2 MiB file on every look took a core of the machine the guest needs).
const TAIL: u64 = 4096;
/// What a log may grow past `MAX_SIZE` before the launcher's next look: far less than the guest
/// writes in one look's time (250 ms) at the fastest rate seen here.
const OVERSHOOT: u64 = 2 * 1024 * 1024;
/// How long the streamed console may trail the log file: the stream had shown the marker within
/// a second everywhere it was watched; a minute leaves room for a loaded machine.
const CONSOLE_CATCH_UP: Duration = Duration::from_secs(60);

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = find(&path, name)
        {
            return Some(found);
        }
    }
    None
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Whether the last [`TAIL`] bytes of `path` contain `marker`.
fn tail_contains(path: &Path, marker: &[u8]) -> bool {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let start = size(path).saturating_sub(TAIL);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut tail).is_err() {
        return false;
    }
    tail.windows(marker.len()).any(|w| w == marker)
}

#[test]
fn a_guest_flooding_its_console_leaves_bounded_logs_and_the_console_shows_its_newest_lines() {
    let _serial = serial();
    require_test_guest();
    let (_dir, manifest) = testguest_replacing(
        "kernelArgs: console=ttyS0",
        &format!("kernelArgs: kubevirt_rs.flood={FLOOD_MIB} console=ttyS0"),
    );
    let mut launcher = Launcher::spawn(&manifest);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-READY", BOOT_TIMEOUT);
    let log = find(launcher.runtime_root.path(), "virt-serial0-log").expect("the serial console's log");
    let begin = Instant::now();
    let (mut largest_file, mut largest_total) = (0, 0);
    let (mut seen, mut changed) = (Vec::new(), Instant::now());
    loop {
        let files: Vec<u64> = std::iter::once(size(&log))
            .chain((0..MAX_BACKUPS).map(|n| size(&backup(&log, n))))
            .collect();
        largest_file = largest_file.max(files.iter().copied().max().unwrap_or(0));
        largest_total = largest_total.max(files.iter().sum());
        assert!(!backup(&log, MAX_BACKUPS).exists(), "more than {MAX_BACKUPS} backups");
        // The marker may land in the log just before the rotation that moves it to `<log>.0`;
        // the guest writes little after it, so the log itself may then stay empty.
        if tail_contains(&log, FLOOD_DONE) || tail_contains(&backup(&log, 0), FLOOD_DONE) {
            break;
        }
        if files != seen {
            seen = files;
            changed = Instant::now();
        }
        assert!(
            changed.elapsed() < STALL_TIMEOUT,
            "the flood stalled: the logs did not change for {STALL_TIMEOUT:?} ({:?} in, sizes {seen:?})",
            begin.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let took = begin.elapsed();
    eprintln!(
        "{FLOOD_MIB} MiB in {took:?}; largest log file {largest_file} bytes, largest total {largest_total} bytes"
    );
    assert!(backup(&log, 0).exists(), "the log was rotated");
    assert!(
        largest_file <= MAX_SIZE + OVERSHOOT,
        "a log file reached {largest_file} bytes"
    );
    let cap = u64::from(MAX_BACKUPS + 1) * (MAX_SIZE + OVERSHOOT);
    assert!(largest_total <= cap, "the logs reached {largest_total} bytes together");
    // The console reaches stdout through the launcher's own stream, which may trail the log file
    // by a moment on a loaded machine: wait for it rather than expect it at once.
    launcher.wait_for_console("KUBEVIRT-RS-FLOOD-DONE", CONSOLE_CATCH_UP);
    stop_gracefully(launcher);
}

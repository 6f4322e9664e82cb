//! Keeping libvirt's QEMU capabilities cache valid where files are copied, as in a container
//! image. libvirt trusts a cached `qemu/capabilities/*.xml` only while the QEMU binary's ctime and
//! the daemon's own (libvirtd and the driver modules it loads) equal the ones recorded in it; a
//! ctime is set anew whenever an image is unpacked, so a cache shipped in an image would always
//! be thrown away and re-probed (about 0.5 s here, seconds on big hosts).
//!
//! So the launcher keeps a fingerprint of the binaries the cache was made with: their size and
//! mtime, which image layers preserve. [`record`] writes it once a domain has run (the cache is
//! then complete); at the next start [`refresh`] compares it with the binaries now installed and,
//! only when every one is unchanged, writes their current ctimes into the cached files. When
//! anything differs the cache is left alone and libvirt re-probes, as it would anyway.
//!
//! libvirt also throws a cache away when KVM's availability differs from when it was made, so an
//! image carries one cache made with KVM and one made without: see [`super::caps_variants`].

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The fingerprint file, next to libvirt's `qemu/` directory in the cache.
pub const FINGERPRINT: &str = "kubevirt-rs-binaries.json";
/// libvirtd, whose ctime is part of libvirt's "self" ctime.
pub const LIBVIRTD: &str = "/usr/sbin/libvirtd";

/// One binary as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Binary {
    path: PathBuf,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn describe(path: &Path) -> std::io::Result<Binary> {
    let meta = std::fs::metadata(path)?;
    Ok(Binary {
        path: path.to_owned(),
        size: meta.size(),
        mtime: meta.mtime(),
        mtime_nsec: meta.mtime_nsec(),
    })
}

/// The cached capability files in `cache_dir`, sorted.
pub(super) fn capability_files(cache_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(cache_dir.join("qemu/capabilities")) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    files.sort();
    files
}

/// The text of element `name` in `xml`, and where it stands.
fn element<'a>(xml: &'a str, name: &str) -> Option<(usize, usize, &'a str)> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some((start, end, &xml[start..end]))
}

fn replace_element(xml: &str, name: &str, value: &str) -> Option<String> {
    let (start, end, _) = element(xml, name)?;
    Some(format!("{}{value}{}", &xml[..start], &xml[end..]))
}

/// The binaries a cache depends on: the emulators it describes, libvirtd and the loaded drivers.
fn dependencies(cache_dir: &Path, drivers: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = capability_files(cache_dir)
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|xml| element(&xml, "emulator").map(|(_, _, e)| PathBuf::from(e)))
        .collect();
    paths.push(PathBuf::from(LIBVIRTD));
    paths.extend(drivers.iter().cloned());
    paths
}

/// Records the binaries the cache in `cache_dir` was made with. Nothing when it holds no
/// capabilities yet.
pub fn record(cache_dir: &Path, drivers: &[PathBuf]) -> std::io::Result<()> {
    if capability_files(cache_dir).is_empty() {
        return Ok(());
    }
    let binaries = dependencies(cache_dir, drivers)
        .iter()
        .map(|p| describe(p))
        .collect::<std::io::Result<Vec<_>>>()?;
    let text = serde_json::to_string_pretty(&binaries).map_err(std::io::Error::other)?;
    let path = cache_dir.join(FINGERPRINT);
    let temp = cache_dir.join(format!("{FINGERPRINT}.tmp"));
    std::fs::write(&temp, text)?;
    std::fs::rename(temp, path)
}

/// What [`refresh`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// No fingerprint: the cache is libvirt's own business.
    NoFingerprint,
    /// A binary changed since the cache was made: left for libvirt to re-probe.
    BinariesChanged,
    /// The cached files now carry the installed binaries' ctimes.
    Refreshed(usize),
}

/// Brings the cached ctimes up to date when the binaries are the ones the cache was made with.
pub fn refresh(cache_dir: &Path, drivers: &[PathBuf]) -> std::io::Result<Refresh> {
    let Ok(text) = std::fs::read_to_string(cache_dir.join(FINGERPRINT)) else {
        return Ok(Refresh::NoFingerprint);
    };
    let Ok(recorded) = serde_json::from_str::<Vec<Binary>>(&text) else {
        return Ok(Refresh::BinariesChanged);
    };
    let current: Option<Vec<Binary>> = recorded.iter().map(|b| describe(&b.path).ok()).collect();
    let expected: Vec<PathBuf> = dependencies(cache_dir, drivers);
    let same_set = {
        let mut a: Vec<&PathBuf> = recorded.iter().map(|b| &b.path).collect();
        let mut b: Vec<&PathBuf> = expected.iter().collect();
        a.sort();
        a.dedup();
        b.sort();
        b.dedup();
        a == b
    };
    if current.as_ref() != Some(&recorded) || !same_set {
        return Ok(Refresh::BinariesChanged);
    }
    let ctime = |p: &Path| std::fs::metadata(p).map(|m| m.ctime());
    let mut own = ctime(Path::new(LIBVIRTD))?;
    for driver in drivers {
        own = own.max(ctime(driver)?);
    }
    let mut refreshed = 0;
    for file in capability_files(cache_dir) {
        let xml = std::fs::read_to_string(&file)?;
        let Some((_, _, emulator)) = element(&xml, "emulator") else {
            continue;
        };
        let qemu = ctime(Path::new(emulator))?;
        let updated = replace_element(&xml, "qemuctime", &qemu.to_string())
            .and_then(|x| replace_element(&x, "selfctime", &own.to_string()));
        if let Some(updated) = updated.filter(|u| *u != xml) {
            let temp = file.with_extension("xml.tmp");
            std::fs::write(&temp, updated)?;
            std::fs::rename(&temp, &file)?;
            refreshed += 1;
        }
    }
    Ok(Refresh::Refreshed(refreshed))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    fn cache_with(emulator: &Path, qemuctime: i64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let caps = dir.path().join("qemu/capabilities");
        std::fs::create_dir_all(&caps).expect("dirs");
        std::fs::write(
            caps.join("abc.xml"),
            format!("<qemuCaps>\n  <emulator>{}</emulator>\n  <qemuctime>{qemuctime}</qemuctime>\n  <selfctime>1</selfctime>\n  <selfvers>9000000</selfvers>\n</qemuCaps>\n", emulator.display()),
        )
        .expect("write");
        dir
    }

    #[test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs libvirtd installed: make test runs it (feature host-tests)"
    )]
    fn unchanged_binaries_get_their_current_ctimes_and_changed_ones_are_left_alone() {
        assert!(
            Path::new(LIBVIRTD).exists(),
            "{LIBVIRTD} is not installed: run `make deps`"
        );
        let bin = tempfile::tempdir().expect("tempdir");
        let emulator = bin.path().join("qemu-system-x86_64");
        let driver = bin.path().join("libvirt_driver_qemu.so");
        std::fs::write(&emulator, b"qemu").expect("write");
        std::fs::write(&driver, b"driver").expect("write");
        let drivers = vec![driver.clone()];
        let cache = cache_with(&emulator, 12345);
        assert_eq!(
            refresh(cache.path(), &drivers).expect("refresh"),
            Refresh::NoFingerprint
        );
        record(cache.path(), &drivers).expect("record");
        assert_eq!(refresh(cache.path(), &drivers).expect("refresh"), Refresh::Refreshed(1));
        let xml = std::fs::read_to_string(cache.path().join("qemu/capabilities/abc.xml")).expect("read");
        let qemu_ctime = std::fs::metadata(&emulator).expect("stat").ctime();
        assert!(xml.contains(&format!("<qemuctime>{qemu_ctime}</qemuctime>")), "{xml}");
        let own = std::fs::metadata(LIBVIRTD)
            .expect("stat")
            .ctime()
            .max(std::fs::metadata(&driver).expect("stat").ctime());
        assert!(xml.contains(&format!("<selfctime>{own}</selfctime>")), "{xml}");
        assert!(xml.contains("<selfvers>9000000</selfvers>"), "the rest is kept: {xml}");
        assert_eq!(
            refresh(cache.path(), &drivers).expect("refresh"),
            Refresh::Refreshed(0),
            "idempotent"
        );

        // A different QEMU (size changes): the cache is libvirt's to re-probe.
        std::fs::write(&emulator, b"another qemu").expect("write");
        let stale = cache_with(&emulator, 777);
        std::fs::copy(cache.path().join(FINGERPRINT), stale.path().join(FINGERPRINT)).expect("copy");
        assert_eq!(
            refresh(stale.path(), &drivers).expect("refresh"),
            Refresh::BinariesChanged
        );
        let untouched = std::fs::read_to_string(stale.path().join("qemu/capabilities/abc.xml")).expect("read");
        assert!(untouched.contains("<qemuctime>777</qemuctime>"));
    }
}

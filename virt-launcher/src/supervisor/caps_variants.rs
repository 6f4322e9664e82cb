//! One capabilities cache for each answer to "may QEMU use KVM here?". libvirt records in its
//! cache whether KVM was usable when it probed QEMU (`/dev/kvm` readable and writable by QEMU's
//! user), and throws the cache away when that answer differs at the next start. A launcher image
//! is used both ways: a launcher pod on a KVM node gets `/dev/kvm`, and one that emulates (the
//! test cluster, `useEmulation`) does not. A cache carried for the other case costs a re-probe of
//! QEMU at the first define, about 0.4 s on the 2-core test machine.
//!
//! So once a domain has run, a local run (`virt-launcher run`, which the image build uses to warm
//! the cache) keeps a copy of its cache (the capability files and the fingerprint,
//! [`super::caps_cache`]) under [`VARIANTS`], named after the answer it was made with ([`keep`]);
//! a launcher pod keeps none. The image build runs the launcher once with `/dev/kvm` and once
//! without, and the image carries both. At every start, before the ctimes are refreshed, the
//! launcher puts the copy for its answer in place ([`select`]). A KVM cache also depends on the host's CPU,
//! microcode and kernel, which libvirt checks too: on a node unlike the machine that built the
//! image, libvirt still re-probes, as it would without a cache. An emulation-only cache does not
//! depend on the host.

use std::path::{Path, PathBuf};

use super::caps_cache::{FINGERPRINT, capability_files};

/// The directory, inside the cache directory, that holds the variants. libvirt reads only
/// `qemu/` there.
pub const VARIANTS: &str = "kubevirt-rs-variants";

/// The device libvirt checks.
const KVM_DEVICE: &str = "/dev/kvm";

/// Whether QEMU may use KVM, as libvirt will decide it when it validates the cache at the first
/// define.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvmAccess {
    /// `/dev/kvm` is readable and writable by QEMU's user.
    Usable,
    /// It is missing or not accessible: QEMU can only emulate (TCG).
    Unusable,
}

impl KvmAccess {
    /// The answer for QEMU started by this process's daemon. libvirt asks whether QEMU's user may
    /// read and write `/dev/kvm` when it validates the cache, at the first define, and by then
    /// the device is QEMU's wherever it exists: a local run's QEMU runs as root, and virt-handler
    /// gives a launcher pod's `/dev/kvm` to the pod's user (uid 107) before its first sync, after
    /// the launcher has started. So the device's presence is the answer libvirt will find.
    #[must_use]
    pub fn of_this_process() -> Self {
        Self::of(Path::new(KVM_DEVICE))
    }

    /// The answer for `device`.
    #[must_use]
    pub fn of(device: &Path) -> Self {
        if device.exists() { Self::Usable } else { Self::Unusable }
    }

    fn dir_name(self) -> &'static str {
        match self {
            Self::Usable => "kvm",
            Self::Unusable => "emulation-only",
        }
    }
}

fn variant_dir(cache_dir: &Path, access: KvmAccess) -> PathBuf {
    cache_dir.join(VARIANTS).join(access.dir_name())
}

fn capabilities_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("qemu/capabilities")
}

/// Writes `from`'s bytes to `to` through a temporary file and a rename, so that a reader sees the
/// old file or the new one; nothing when `to` already holds them.
fn replace_file(from: &Path, to: &Path) -> std::io::Result<()> {
    let bytes = std::fs::read(from)?;
    if std::fs::read(to).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let name = to
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temp = to.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, to)
}

/// Copies the capability files and the fingerprint of `from` into `to` (a cache directory
/// layout): each file replaces its namesake, then the capability files `from` lacks go, and the
/// fingerprint comes last. A copy that fails half-way leaves whole files, which the fingerprint
/// no longer matches or libvirt re-probes: never a torn file.
fn copy_cache(from: &Path, to: &Path) -> std::io::Result<()> {
    let target = capabilities_dir(to);
    std::fs::create_dir_all(&target)?;
    let sources = capability_files(from);
    for file in &sources {
        let Some(name) = file.file_name() else { continue };
        replace_file(file, &target.join(name))?;
    }
    for old in capability_files(to) {
        if !sources.iter().any(|s| s.file_name() == old.file_name()) {
            std::fs::remove_file(old)?;
        }
    }
    replace_file(&from.join(FINGERPRINT), &to.join(FINGERPRINT))
}

/// Removes `dir` and what it holds; a directory that is not there is no error.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Keeps the cache in `cache_dir` as the variant for `access`. Nothing when the cache has no
/// fingerprint yet ([`super::caps_cache::record`] writes it once a domain has run).
///
/// # Errors
/// When the copy cannot be written.
pub fn keep(cache_dir: &Path, access: KvmAccess) -> std::io::Result<()> {
    if !cache_dir.join(FINGERPRINT).exists() || capability_files(cache_dir).is_empty() {
        return Ok(());
    }
    let dir = variant_dir(cache_dir, access);
    // Two local runs may keep at once: each stages its own copy.
    let staging = dir.with_extension(format!("new.{}", std::process::id()));
    remove_tree(&staging)?;
    copy_cache(cache_dir, &staging)?;
    remove_tree(&dir)?;
    std::fs::rename(&staging, &dir)
}

/// Puts the variant for `access` in place as the cache libvirt reads, when the cache directory
/// carries one. Returns whether it did.
///
/// # Errors
/// When the variant cannot be copied.
pub fn select(cache_dir: &Path, access: KvmAccess) -> std::io::Result<bool> {
    let dir = variant_dir(cache_dir, access);
    if !dir.join(FINGERPRINT).exists() {
        return Ok(false);
    }
    copy_cache(&dir, cache_dir)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_cache(dir: &Path, marker: &str) {
        let caps = capabilities_dir(dir);
        std::fs::create_dir_all(&caps).expect("dirs");
        std::fs::write(caps.join("abc.xml"), format!("<qemuCaps>{marker}</qemuCaps>")).expect("write");
        std::fs::write(dir.join(FINGERPRINT), format!("[\"{marker}\"]")).expect("write");
    }

    fn live(dir: &Path) -> (String, String) {
        (
            std::fs::read_to_string(capabilities_dir(dir).join("abc.xml")).expect("read xml"),
            std::fs::read_to_string(dir.join(FINGERPRINT)).expect("read fingerprint"),
        )
    }

    #[test]
    fn each_access_gets_the_cache_made_with_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = dir.path();
        write_cache(cache, "kvm");
        keep(cache, KvmAccess::Usable).expect("keep kvm");
        write_cache(cache, "tcg");
        keep(cache, KvmAccess::Unusable).expect("keep tcg");

        assert!(select(cache, KvmAccess::Usable).expect("select"));
        assert_eq!(
            live(cache),
            ("<qemuCaps>kvm</qemuCaps>".to_owned(), "[\"kvm\"]".to_owned())
        );
        assert!(select(cache, KvmAccess::Unusable).expect("select"));
        assert_eq!(
            live(cache),
            ("<qemuCaps>tcg</qemuCaps>".to_owned(), "[\"tcg\"]".to_owned())
        );

        // Keeping again replaces the variant, and selecting leaves no temporary file.
        write_cache(cache, "tcg2");
        keep(cache, KvmAccess::Unusable).expect("keep again");
        assert!(select(cache, KvmAccess::Unusable).expect("select"));
        assert_eq!(live(cache).1, "[\"tcg2\"]");
        let names: Vec<_> = std::fs::read_dir(capabilities_dir(cache))
            .expect("read dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["abc.xml"]);
    }

    #[test]
    fn selecting_replaces_changed_files_only_and_drops_the_ones_the_variant_lacks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = dir.path();
        write_cache(cache, "tcg");
        keep(cache, KvmAccess::Unusable).expect("keep");
        let live_xml = capabilities_dir(cache).join("abc.xml");
        let before = std::fs::metadata(&live_xml).expect("stat").modified().expect("mtime");
        std::fs::write(capabilities_dir(cache).join("stale.xml"), "<qemuCaps/>").expect("write");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(select(cache, KvmAccess::Unusable).expect("select"));
        let after = std::fs::metadata(&live_xml).expect("stat").modified().expect("mtime");
        assert_eq!(before, after, "an identical file is not written again");
        assert!(
            !capabilities_dir(cache).join("stale.xml").exists(),
            "a file the variant lacks goes"
        );
    }

    #[test]
    fn without_a_variant_the_cache_is_left_as_it_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_cache(dir.path(), "kvm");
        keep(dir.path(), KvmAccess::Usable).expect("keep");
        assert!(!select(dir.path(), KvmAccess::Unusable).expect("select"));
        assert_eq!(live(dir.path()).1, "[\"kvm\"]");
    }

    #[test]
    fn a_cache_without_a_fingerprint_is_not_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let caps = capabilities_dir(dir.path());
        std::fs::create_dir_all(&caps).expect("dirs");
        std::fs::write(caps.join("abc.xml"), "<qemuCaps/>").expect("write");
        keep(dir.path(), KvmAccess::Usable).expect("keep");
        assert!(!dir.path().join(VARIANTS).exists());
    }

    #[test]
    fn access_follows_the_devices_presence() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(KvmAccess::of(&dir.path().join("no-such-device")), KvmAccess::Unusable);
        let device = dir.path().join("device");
        std::fs::write(&device, b"").expect("write");
        assert_eq!(KvmAccess::of(&device), KvmAccess::Usable);
    }
}

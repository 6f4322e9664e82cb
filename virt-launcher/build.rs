//! Builds `libvirtd-pages.so` (`preload/libvirtd_pages.rs`), the library the launcher preloads
//! into its libvirtd so that libvirtd lets go of its start-up pages, and leaves it in `OUT_DIR`
//! for `src/supervisor/page_release.rs` to embed. It is compiled with `rustc` alone: it needs
//! `std` and the C library only.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = manifest.join("preload/libvirtd_pages.rs");
    for file in [
        "preload/libvirtd_pages.rs",
        "preload/protocol.rs",
        "src/resident_pages/loaded_objects.rs",
    ] {
        println!("cargo::rerun-if-changed={}", manifest.join(file).display());
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let library = out.join("libvirtd-pages.so");
    let mut rustc = Command::new(rustc);
    // The linker cargo would use for this target, when one is configured.
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        rustc.arg("-C").arg(format!("linker={}", linker.to_string_lossy()));
    }
    let status = rustc
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "cdylib",
            "--crate-name",
            "libvirtd_pages",
        ])
        .args(["--target", &target])
        .args([
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "-C",
            "strip=symbols",
            "-C",
            "debuginfo=0",
        ])
        .arg("-o")
        .arg(&library)
        .arg(&source)
        .status()
        .expect("running rustc for preload/libvirtd_pages.rs");
    assert!(status.success(), "rustc could not build {}", source.display());
}

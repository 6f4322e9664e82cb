//! Imports through the real `qemu-img`: images in each format it writes come out as the same raw
//! disk, a corrupt image fails with qemu-img's own words, and nothing is left behind.

use std::io::{Cursor, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use cdi_importer::convert::{Converter as _, QemuImg};
use cdi_importer::format::ImageFormat;
use cdi_importer::import::{self, ImportError, Request, Target};

/// A 6 MiB disk with data at its start, its middle and its end.
fn disk() -> Vec<u8> {
    let mut bytes = vec![0_u8; 6 << 20];
    bytes[..4096].fill(0xeb);
    bytes[3 << 20..(3 << 20) + 65_536].fill(0x5a);
    let end = bytes.len();
    bytes[end - 512..].fill(0xaa);
    bytes
}

fn qemu_img(args: &[&str]) {
    let status = Command::new("qemu-img")
        .args(args)
        .status()
        .expect("qemu-img is installed (make deps)");
    assert!(status.success(), "qemu-img {args:?}");
}

/// The disk in `format`, as qemu-img writes it.
fn image_in(dir: &Path, format: &str) -> Vec<u8> {
    let raw = dir.join("source.raw");
    std::fs::write(&raw, disk()).expect("raw");
    let out = dir.join(format!("source.{format}"));
    qemu_img(&[
        "convert",
        "-f",
        "raw",
        "-O",
        format,
        raw.to_str().expect("path"),
        out.to_str().expect("path"),
    ]);
    std::fs::read(out).expect("image")
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

struct Volume {
    _root: tempfile::TempDir,
    disk: PathBuf,
    scratch: PathBuf,
    work: PathBuf,
}

fn volume() -> Volume {
    let root = tempfile::tempdir().expect("temp dir");
    let [data, scratch, work] = ["data", "scratch", "work"].map(|d| {
        let path = root.path().join(d);
        std::fs::create_dir(&path).expect("dir");
        path
    });
    Volume {
        disk: data.join("disk.img"),
        scratch,
        work,
        _root: root,
    }
}

fn request(volume: &Volume) -> Request {
    Request {
        // 8 MiB asked for, the claim grown by the 0.06 overhead.
        requested_size: Some((8 << 20) * 106 / 100 + 1),
        filesystem_overhead: "0.06".to_owned(),
        scratch: Some(volume.scratch.clone()),
        verbatim: false,
    }
}

#[test]
fn every_format_qemu_img_writes_imports_as_the_same_raw_disk() {
    for (format, expected) in [
        ("qcow2", ImageFormat::Qcow2 { virtual_size: 6 << 20 }),
        ("vmdk", ImageFormat::Vmdk),
        ("vdi", ImageFormat::Vdi),
        ("vpc", ImageFormat::Vhd),
        ("vhdx", ImageFormat::Vhdx),
    ] {
        let volume = volume();
        let image = gzip(&image_in(&volume.work, format));
        let outcome = import::import(
            Box::new(Cursor::new(image)),
            &Target::File(volume.disk.clone()),
            &request(&volume),
            &QemuImg::default(),
        )
        .unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(outcome.format, expected, "{format}");
        assert_eq!(outcome.resized_to, Some(8 << 20), "{format}");
        let written = std::fs::read(&volume.disk).expect("disk");
        assert_eq!(written.len(), 8 << 20, "{format}");
        // VHD rounds its size up to its own geometry: compare what the source held.
        assert!(written[..disk().len()] == disk()[..], "{format}: the same bytes");
        assert_eq!(
            QemuImg::default().virtual_size(&volume.disk, "raw").expect("info"),
            8 << 20
        );
        assert_eq!(
            std::fs::read_dir(&volume.scratch).expect("scratch").count(),
            0,
            "{format}"
        );
    }
}

#[test]
fn a_corrupt_qcow2_fails_with_qemu_imgs_words_and_leaves_nothing() {
    let volume = volume();
    let mut image = image_in(&volume.work, "qcow2");
    // The L1 table's offset, pointed past the end of the image.
    image[40..48].copy_from_slice(&u64::MAX.to_be_bytes());
    let error = import::import(
        Box::new(Cursor::new(image)),
        &Target::File(volume.disk.clone()),
        &request(&volume),
        &QemuImg::default(),
    )
    .expect_err("corrupt");
    assert!(matches!(error, ImportError::Convert(_)), "{error}");
    assert!(error.to_string().starts_with("qemu-img info failed: "), "{error}");
    assert!(!volume.disk.exists());
    assert_eq!(std::fs::read_dir(&volume.scratch).expect("scratch").count(), 0);
}

#[test]
fn a_qcow2_naming_a_backing_file_is_refused_and_the_file_never_read() {
    let volume = volume();
    let secret = volume.work.join("secret");
    std::fs::write(&secret, b"the importer's secret").expect("secret");
    let overlay = volume.work.join("overlay.qcow2");
    qemu_img(&[
        "create",
        "-q",
        "-f",
        "qcow2",
        "-b",
        secret.to_str().expect("path"),
        "-F",
        "raw",
        overlay.to_str().expect("path"),
        "1M",
    ]);
    let error = import::import(
        Box::new(Cursor::new(std::fs::read(&overlay).expect("overlay"))),
        &Target::File(volume.disk.clone()),
        &request(&volume),
        &QemuImg::default(),
    )
    .expect_err("a backing file");
    assert!(error.to_string().contains("names the backing file"), "{error}");
    assert!(!volume.disk.exists());
    assert_eq!(std::fs::read_dir(&volume.scratch).expect("scratch").count(), 0);
}

/// `image` imported with no scratch space: the disk written as the image streams, or why not.
fn streamed(volume: &Volume, image: Vec<u8>) -> Result<Vec<u8>, ImportError> {
    let mut no_scratch = request(volume);
    no_scratch.scratch = None;
    import::import(
        Box::new(Cursor::new(image)),
        &Target::File(volume.disk.clone()),
        &no_scratch,
        &QemuImg::default(),
    )?;
    Ok(std::fs::read(&volume.disk).expect("disk"))
}

#[test]
fn a_qcow2_image_streams_into_the_disk_without_scratch_space_at_every_cluster_size() {
    for cluster_size in ["512", "65536", "2M"] {
        let volume = volume();
        let raw = volume.work.join("source.raw");
        std::fs::write(&raw, disk()).expect("raw");
        let qcow2 = volume.work.join("source.qcow2");
        let (raw, qcow2) = (raw.to_str().expect("path"), qcow2.to_str().expect("path"));
        let option = format!("cluster_size={cluster_size}");
        qemu_img(&["convert", "-f", "raw", "-O", "qcow2", "-o", &option, raw, qcow2]);
        let written = streamed(&volume, gzip(&std::fs::read(qcow2).expect("image")))
            .unwrap_or_else(|e| panic!("{cluster_size}: {e}"));
        assert_eq!(written.len(), 8 << 20, "{cluster_size}: grown to the size asked for");
        assert!(written[..disk().len()] == disk()[..], "{cluster_size}: the same bytes");
        assert!(written[disk().len()..].iter().all(|&b| b == 0), "{cluster_size}");
    }
}

#[test]
fn a_qcow2_a_guest_wrote_out_of_order_streams_too() {
    let volume = volume();
    let image = volume.work.join("guest.qcow2");
    let path = image.to_str().expect("path");
    qemu_img(&["create", "-q", "-f", "qcow2", path, "6M"]);
    // Written end first, as a guest may: each cluster is allocated after its table.
    for write in [
        "write -q -P 0xaa 6291328 128",
        "write -q -P 0x5a 3M 64k",
        "write -q -P 0xeb 0 4k",
        "write -q -z 3M 4k",
    ] {
        let status = Command::new("qemu-io")
            .args(["-f", "qcow2", "-c", write, path])
            .status()
            .expect("qemu-io is installed (make deps)");
        assert!(status.success(), "qemu-io {write}");
    }
    let mut expected = vec![0_u8; 6 << 20];
    expected[..4096].fill(0xeb);
    expected[(3 << 20) + 4096..(3 << 20) + 65_536].fill(0x5a);
    expected[6_291_328..6_291_456].fill(0xaa);
    let written = streamed(&volume, std::fs::read(&image).expect("image")).expect("streams");
    assert!(written[..6 << 20] == expected[..], "the guest's bytes");
}

#[test]
fn a_compressed_qcow2_asks_for_scratch_space_and_converts_with_it() {
    let volume = volume();
    let raw = volume.work.join("source.raw");
    std::fs::write(&raw, disk()).expect("raw");
    let qcow2 = volume.work.join("compressed.qcow2");
    qemu_img(&[
        "convert",
        "-c",
        "-f",
        "raw",
        "-O",
        "qcow2",
        raw.to_str().expect("path"),
        qcow2.to_str().expect("path"),
    ]);
    let image = std::fs::read(&qcow2).expect("image");
    let error = streamed(&volume, image.clone()).expect_err("compressed clusters");
    assert!(
        matches!(error, ImportError::NoScratch(ImageFormat::Qcow2 { .. })),
        "{error}"
    );
    assert!(!volume.disk.exists(), "nothing half-written is left");
    import::import(
        Box::new(Cursor::new(image)),
        &Target::File(volume.disk.clone()),
        &request(&volume),
        &QemuImg::default(),
    )
    .expect("with scratch space");
    assert!(std::fs::read(&volume.disk).expect("disk")[..disk().len()] == disk()[..]);
}

//! qcow2 uploads with the host's qemu-img (`make deps`): written into the claim as they stream
//! when their layout allows, and answered before they are written when async, as upstream's
//! are; one whose layout does not allow is converted from the copy saved to the scratch space as
//! it streamed, and refused without scratch space.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cdi_importer::convert::{ConvertError, Converter, QemuImg};
use support::{MIB, Setup, head, raw_disk, start};

/// The real qemu-img, counting its conversions.
#[derive(Default)]
struct CountingQemuImg {
    qemu_img: QemuImg,
    conversions: AtomicUsize,
}

impl Converter for CountingQemuImg {
    fn virtual_size(&self, image: &Path, format: &str) -> Result<u64, ConvertError> {
        self.qemu_img.virtual_size(image, format)
    }

    fn convert_to_raw(&self, image: &Path, format: &str, target: &Path) -> Result<(), ConvertError> {
        self.conversions.fetch_add(1, Ordering::SeqCst);
        self.qemu_img.convert_to_raw(image, format, target)
    }
}

/// `disk` as a qcow2 image.
fn qcow2(setup: &Setup, disk: &[u8]) -> Vec<u8> {
    let raw = setup.dir.path().join("source.raw");
    let image = setup.dir.path().join("source.qcow2");
    std::fs::write(&raw, disk).expect("raw");
    let status = Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "qcow2"])
        .arg(&raw)
        .arg(&image)
        .status()
        .expect("qemu-img (make deps installs it)");
    assert!(status.success(), "qemu-img convert");
    std::fs::read(&image).expect("qcow2")
}

#[tokio::test]
async fn an_async_qcow2_upload_is_answered_then_written_leaving_no_scratch_copy() {
    let setup = Setup::new();
    std::fs::create_dir(setup.scratch()).expect("scratch");
    let converter = Arc::new(CountingQemuImg::default());
    let server = start(setup.config(16 * MIB), converter.clone()).await;
    let proxy = setup.client(Some(&setup.proxy));
    let disk = raw_disk(5 * MIB);
    let image = qcow2(&setup, &disk);
    assert!(image.len() < disk.len(), "qcow2 leaves out the zeros");
    let answer = proxy.post(server.address, "/v1beta1/upload-async", image).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(server.outcome().await.is_ok());
    assert_eq!(
        converter.conversions.load(Ordering::SeqCst),
        0,
        "streamed, not converted"
    );
    assert_eq!(head(&setup.disk(), disk.len()), disk);
    assert_eq!(std::fs::metadata(setup.disk()).expect("disk").len(), 16 * MIB);
    let left: Vec<_> = std::fs::read_dir(setup.scratch()).expect("scratch").collect();
    assert!(left.is_empty(), "the scratch copy is removed: {left:?}");
}

/// `disk` as a qcow2 image with compressed clusters, which cannot be written as it streams.
fn compressed_qcow2(setup: &Setup, disk: &[u8]) -> Vec<u8> {
    let raw = setup.dir.path().join("source.raw");
    let image = setup.dir.path().join("compressed.qcow2");
    std::fs::write(&raw, disk).expect("raw");
    let status = Command::new("qemu-img")
        .args(["convert", "-c", "-f", "raw", "-O", "qcow2"])
        .arg(&raw)
        .arg(&image)
        .status()
        .expect("qemu-img (make deps installs it)");
    assert!(status.success(), "qemu-img convert -c");
    std::fs::read(&image).expect("qcow2")
}

#[tokio::test]
async fn without_scratch_space_a_qcow2_upload_streams_when_it_can() {
    let setup = Setup::new();
    let server = start(setup.config(16 * MIB), Arc::new(QemuImg::default())).await;
    let proxy = setup.client(Some(&setup.proxy));
    let disk = raw_disk(2 * MIB);
    let answer = proxy
        .post(server.address, "/v1beta1/upload", qcow2(&setup, &disk))
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(head(&setup.disk(), disk.len()), disk);
    server.ended.abort();
}

#[tokio::test]
async fn a_qcow2_upload_that_cannot_stream_is_converted_from_its_saved_copy() {
    let setup = Setup::new();
    std::fs::create_dir(setup.scratch()).expect("scratch");
    let converter = Arc::new(CountingQemuImg::default());
    let server = start(setup.config(16 * MIB), converter.clone()).await;
    let proxy = setup.client(Some(&setup.proxy));
    let disk = raw_disk(2 * MIB);
    let answer = proxy
        .post(server.address, "/v1beta1/upload", compressed_qcow2(&setup, &disk))
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        converter.conversions.load(Ordering::SeqCst),
        1,
        "converted from the copy"
    );
    assert_eq!(head(&setup.disk(), disk.len()), disk);
    assert_eq!(std::fs::metadata(setup.disk()).expect("disk").len(), 16 * MIB);
    let left: Vec<_> = std::fs::read_dir(setup.scratch()).expect("scratch").collect();
    assert!(left.is_empty(), "the scratch copy is removed: {left:?}");
    server.ended.abort();
}

#[tokio::test]
async fn a_qcow2_upload_that_cannot_stream_without_scratch_space_fails_with_500_and_no_disk() {
    let setup = Setup::new();
    let server = start(setup.config(16 * MIB), Arc::new(QemuImg::default())).await;
    let proxy = setup.client(Some(&setup.proxy));
    let image = compressed_qcow2(&setup, &raw_disk(2 * MIB));
    let answer = proxy.post(server.address, "/v1beta1/upload", image).await;
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert!(answer.body.contains("no scratch space"), "{}", answer.body);
    assert!(!setup.disk().exists());
    server.ended.abort();
}

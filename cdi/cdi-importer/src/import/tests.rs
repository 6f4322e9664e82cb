use std::cell::RefCell;
use std::io::{Cursor, Write as _};

use super::*;
use crate::qcow2_stream::test_image::{CLUSTER, Image, expected};

/// A converter that says every image is `size` bytes and converts by writing `disk`.
struct FakeConverter {
    size: u64,
    disk: Vec<u8>,
    calls: RefCell<Vec<String>>,
    /// The image as it was saved when its size was read.
    saved: RefCell<Vec<u8>>,
    /// The target's length when it was converted into.
    target_length: RefCell<Option<u64>>,
}

impl FakeConverter {
    fn new(size: u64, disk: Vec<u8>) -> Self {
        Self {
            size,
            disk,
            calls: RefCell::new(Vec::new()),
            saved: RefCell::new(Vec::new()),
            target_length: RefCell::new(None),
        }
    }
}

impl Converter for FakeConverter {
    fn virtual_size(&self, image: &Path, format: &str) -> Result<u64, ConvertError> {
        *self.saved.borrow_mut() = std::fs::read(image).expect("the image is saved before it is read");
        self.calls
            .borrow_mut()
            .push(format!("info {format} {}", image.display()));
        Ok(self.size)
    }

    fn convert_to_raw(&self, image: &Path, format: &str, target: &Path) -> Result<(), ConvertError> {
        self.calls
            .borrow_mut()
            .push(format!("convert {format} {} {}", image.display(), target.display()));
        *self.target_length.borrow_mut() = std::fs::metadata(target).ok().map(|m| m.len());
        std::fs::write(target, &self.disk).map_err(|e| ConvertError::Info(e.to_string()))
    }
}

struct Dirs {
    _root: tempfile::TempDir,
    data: PathBuf,
    scratch: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().expect("temp dir");
    let data = root.path().join("data");
    let scratch = root.path().join("scratch");
    std::fs::create_dir(&data).expect("data");
    std::fs::create_dir(&scratch).expect("scratch");
    Dirs {
        data,
        scratch,
        _root: root,
    }
}

fn request(dirs: &Dirs, requested_size: Option<u64>) -> Request {
    Request {
        requested_size,
        filesystem_overhead: "0.06".to_owned(),
        scratch: Some(dirs.scratch.clone()),
        verbatim: false,
    }
}

/// `size` grown by the 0.06 overhead, as the claim's request is.
fn grown(size: u64) -> u64 {
    (size * 1060).div_ceil(1000)
}

fn stream(bytes: Vec<u8>) -> Stream {
    Box::new(Cursor::new(bytes))
}

fn disk() -> Vec<u8> {
    let mut bytes = vec![0_u8; 3 << 20];
    bytes[..4096].fill(0xeb);
    bytes[2 << 20..(2 << 20) + 10].fill(7);
    bytes
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

fn qcow2_header(virtual_size: u64) -> Vec<u8> {
    let mut header = b"QFI\xfb\x00\x00\x00\x03".to_vec();
    header.resize(4096, 0);
    header[24..32].copy_from_slice(&virtual_size.to_be_bytes());
    header
}

#[test]
fn a_raw_image_is_written_as_it_comes_and_grown_to_the_size_asked_for() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(0, Vec::new());
    let outcome = import(
        stream(gzip(&disk())),
        &target,
        &request(&dirs, Some(grown(64 << 20))),
        &converter,
    )
    .expect("imported");
    assert_eq!(
        outcome,
        Outcome {
            format: ImageFormat::Raw,
            compression: vec![Compression::Gzip],
            virtual_size: disk().len() as u64,
            resized_to: Some(64 << 20),
        }
    );
    let written = std::fs::read(target.path()).expect("the disk");
    assert_eq!(written.len(), 64 << 20);
    assert!(written[..disk().len()] == disk()[..], "the image's bytes");
    assert!(
        written[disk().len()..].iter().all(|&b| b == 0),
        "the growth reads as zeros"
    );
    assert!(converter.calls.borrow().is_empty(), "raw needs no qemu-img");
    assert_eq!(std::fs::read_dir(&dirs.scratch).expect("scratch").count(), 0);
}

#[test]
fn an_image_as_large_as_asked_is_not_grown_and_a_larger_one_is_refused() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(0, Vec::new());
    let size = disk().len() as u64;
    let outcome = import(stream(disk()), &target, &request(&dirs, Some(grown(size))), &converter).expect("imported");
    assert_eq!(outcome.resized_to, None);
    assert_eq!(std::fs::metadata(target.path()).expect("disk").len(), size);
    let outcome = import(stream(disk()), &target, &request(&dirs, None), &converter).expect("imported");
    assert_eq!(outcome.resized_to, None, "no size asked for, none grown to");
    let error = import(
        stream(disk()),
        &target,
        &request(&dirs, Some(grown(size - (1 << 20)))),
        &converter,
    )
    .expect_err("larger than asked for");
    assert!(error.to_string().contains("A larger PVC is required"), "{error}");
    assert!(!target.path().exists());
}

#[test]
fn a_format_to_convert_goes_through_the_scratch_space_which_is_emptied() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(5 << 20, vec![3; 5 << 20]);
    let mut vmdk = b"KDMV".to_vec();
    vmdk.resize(8192, 1);
    let outcome = import(stream(vmdk), &target, &request(&dirs, Some(grown(8 << 20))), &converter).expect("imported");
    assert_eq!(outcome.format, ImageFormat::Vmdk);
    assert_eq!(outcome.virtual_size, 5 << 20);
    assert_eq!(outcome.resized_to, Some(8 << 20));
    let saved = dirs.scratch.join(SCRATCH_IMAGE);
    assert_eq!(
        *converter.calls.borrow(),
        [
            format!("info vmdk {}", saved.display()),
            format!("convert vmdk {} {}", saved.display(), target.path().display())
        ]
    );
    assert!(!saved.exists(), "the scratch image is removed");
    let written = std::fs::read(target.path()).expect("disk");
    assert_eq!(written.len(), 8 << 20);
    assert!(written[..5 << 20].iter().all(|&b| b == 3));
}

#[test]
fn a_qcow2_larger_than_the_volume_is_refused_before_it_is_downloaded() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(0, Vec::new());
    let error = import(
        stream(qcow2_header(u64::MAX / 2)),
        &target,
        &request(&dirs, None),
        &converter,
    )
    .expect_err("too large");
    assert!(matches!(error, ImportError::TooLarge(_)), "{error}");
    assert!(error.to_string().contains("A larger PVC is required"), "{error}");
    assert!(converter.calls.borrow().is_empty());
    assert!(!target.path().exists());
    assert_eq!(std::fs::read_dir(&dirs.scratch).expect("scratch").count(), 0);
}

#[test]
fn a_converted_image_larger_than_the_volume_is_refused_and_leaves_nothing() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(u64::MAX / 2, Vec::new());
    let error = import(
        stream(b"conectix-and-more".to_vec()),
        &target,
        &request(&dirs, None),
        &converter,
    )
    .expect_err("too large");
    assert!(matches!(error, ImportError::TooLarge(_)), "{error}");
    assert_eq!(converter.calls.borrow().len(), 1, "read, never converted");
    assert!(!target.path().exists());
    assert_eq!(std::fs::read_dir(&dirs.scratch).expect("scratch").count(), 0);
}

#[test]
fn a_format_to_convert_without_scratch_space_is_refused() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let mut no_scratch = request(&dirs, None);
    no_scratch.scratch = None;
    let error = import(
        stream(qcow2_header(1 << 20)),
        &target,
        &no_scratch,
        &FakeConverter::new(0, Vec::new()),
    )
    .expect_err("no scratch");
    assert!(
        matches!(error, ImportError::NoScratch(ImageFormat::Qcow2 { .. })),
        "{error}"
    );
}

#[test]
fn a_stream_cut_short_leaves_no_disk_file() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    std::fs::write(target.path(), b"an earlier attempt").expect("earlier");
    let mut cut = gzip(&disk());
    cut.truncate(cut.len() / 2);
    let error = import(
        stream(cut),
        &target,
        &request(&dirs, None),
        &FakeConverter::new(0, Vec::new()),
    )
    .expect_err("cut short");
    assert!(
        matches!(
            error,
            ImportError::Copy {
                source: CopyError::Read(_),
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("disk.img"), "{error}");
    assert!(!target.path().exists());
}

#[test]
fn a_block_volume_gets_every_byte_and_is_never_grown_or_overrun() {
    let dirs = dirs();
    let device = dirs.data.join("device");
    std::fs::write(&device, vec![0xff_u8; 4 << 20]).expect("device");
    let target = Target::Block(device.clone());
    let converter = FakeConverter::new(0, Vec::new());
    let outcome = import(stream(disk()), &target, &request(&dirs, Some(64 << 20)), &converter).expect("imported");
    assert_eq!(outcome.resized_to, None);
    let written = std::fs::read(&device).expect("device");
    assert_eq!(written.len(), 4 << 20, "a device keeps its size");
    assert!(
        written[..disk().len()] == disk()[..],
        "zeros overwrite what the device held"
    );
    let error = import(stream(vec![1_u8; 5 << 20]), &target, &request(&dirs, None), &converter)
        .expect_err("larger than the device");
    assert!(
        matches!(error, ImportError::Copy { source: CopyError::TooLarge { limit }, .. } if limit == 4 << 20),
        "{error}"
    );
    assert!(device.exists(), "a device is never removed");
}

#[test]
fn a_bad_overhead_is_refused_before_anything_is_written() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let mut bad = request(&dirs, None);
    bad.filesystem_overhead = "six percent".to_owned();
    let error = import(stream(disk()), &target, &bad, &FakeConverter::new(0, Vec::new())).expect_err("bad");
    assert!(matches!(error, ImportError::Overhead(_)), "{error}");
    assert!(!target.path().exists());
}

#[test]
fn a_verbatim_stream_is_written_as_it_is_even_when_it_looks_like_an_image() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(0, Vec::new());
    // A raw disk whose first bytes happen to be a gzip stream's and a qcow2's header: a clone
    // copies it as it is.
    let mut bytes = gzip(&qcow2_header(1 << 20));
    bytes.resize(1 << 20, 0);
    let mut verbatim = request(&dirs, Some(grown(2 << 20)));
    verbatim.verbatim = true;
    let outcome = import(stream(bytes.clone()), &target, &verbatim, &converter).expect("imported");
    assert_eq!(outcome.format, ImageFormat::Raw);
    assert!(outcome.compression.is_empty());
    assert_eq!(outcome.virtual_size, 1 << 20);
    let written = std::fs::read(target.path()).expect("the disk");
    assert!(written[..bytes.len()] == bytes[..], "the bytes as they came");
    assert!(converter.calls.borrow().is_empty());
}

/// A connection reset.
struct Reset;

impl std::io::Read for Reset {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset"))
    }
}

/// A small qcow2 image: guest clusters 3 and 0, in that order.
fn small_qcow2() -> Image {
    Image::new(8 * CLUSTER as u64, &[(3, 0xaa), (0, 0x55)])
}

#[test]
fn a_qcow2_image_streams_into_the_disk_even_with_scratch_space_which_is_left_empty() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(0, Vec::new());
    let image = small_qcow2();
    let outcome = import(stream(image.bytes()), &target, &request(&dirs, None), &converter).expect("imported");
    assert_eq!(outcome.virtual_size, image.virtual_size);
    assert!(
        converter.calls.borrow().is_empty(),
        "no qemu-img: {:?}",
        converter.calls.borrow()
    );
    assert!(std::fs::read(target.path()).expect("disk") == expected(&image));
    assert_eq!(std::fs::read_dir(&dirs.scratch).expect("scratch").count(), 0);
}

#[test]
fn a_qcow2_image_one_pass_cannot_take_is_converted_from_its_whole_saved_copy() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    // Guest cluster 3 is written when 0 follows it; the image then ends inside cluster 5, before
    // what its table names.
    let mut bytes = Image::new(8 * CLUSTER as u64, &[(3, 0xaa), (0, 0x55), (5, 0x77)]).bytes();
    bytes.truncate(bytes.len() - CLUSTER / 2);
    let converter = FakeConverter::new(8 * CLUSTER as u64, vec![9; 4096]);
    let outcome = import(stream(bytes.clone()), &target, &request(&dirs, None), &converter).expect("imported");
    assert_eq!(outcome.virtual_size, 8 * CLUSTER as u64);
    let saved = dirs.scratch.join(SCRATCH_IMAGE);
    assert_eq!(
        *converter.calls.borrow(),
        [
            format!("info qcow2 {}", saved.display()),
            format!("convert qcow2 {} {}", saved.display(), target.path().display())
        ]
    );
    assert!(*converter.saved.borrow() == bytes, "the saved copy is the whole stream");
    assert_eq!(
        *converter.target_length.borrow(),
        Some(0),
        "what the pass wrote is cut before qemu-img writes the disk"
    );
    assert!(!saved.exists(), "the scratch image is removed");
}

#[test]
fn a_copy_that_cannot_be_saved_stops_while_the_stream_goes_on() {
    let dirs = dirs();
    let saved = dirs.scratch.join(SCRATCH_IMAGE);
    std::fs::write(&saved, b"").expect("copy");
    let read_only = File::open(&saved).expect("read only");
    let data = vec![5_u8; 3 * SAVE_BUFFER + 7];
    let mut source = Cursor::new(data.clone());
    let mut saving = Saving {
        stream: &mut source,
        copy: &read_only,
        at: 0,
        failed: None,
    };
    let mut read = Vec::new();
    saving.read_to_end(&mut read).expect("the stream is read whole");
    assert!(read == data);
    assert!(saving.failed.is_some(), "the write was refused");
    let target = Target::File(dirs.data.join("disk.img"));
    let error = saving.finish(&target, &saved).expect_err("the copy is needed");
    assert!(
        matches!(&error, ImportError::Copy { path, source: CopyError::Write(_) } if *path == saved),
        "{error}"
    );
}

#[test]
fn a_qcow2_download_that_breaks_leaves_no_disk_and_no_saved_copy() {
    let dirs = dirs();
    let target = Target::File(dirs.data.join("disk.img"));
    let converter = FakeConverter::new(0, Vec::new());
    let mut bytes = small_qcow2().bytes();
    bytes.truncate(bytes.len() - CLUSTER / 2);
    let broken: Stream = Box::new(Cursor::new(bytes).chain(Reset));
    let error = import(broken, &target, &request(&dirs, None), &converter).expect_err("reset");
    assert!(matches!(error, ImportError::Copy { .. }), "{error}");
    assert!(converter.calls.borrow().is_empty());
    assert!(!target.path().exists());
    assert_eq!(std::fs::read_dir(&dirs.scratch).expect("scratch").count(), 0);
}

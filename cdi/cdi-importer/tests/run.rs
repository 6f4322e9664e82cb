//! A job run as the importer pod runs it, against a server on the loopback: the disk lands in
//! the data directory (or the block device), the checksum is checked, a format to convert asks
//! for scratch space, a blank disk takes the size asked for, and each failure ends with
//! upstream's termination message.

mod support;

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt as _;

use cdi_importer::checksum::Checksum;
use cdi_importer::http_source::HttpSource;
use cdi_importer::job::{Job, Source};
use cdi_importer::run::{self, COMPLETE, Ended, Finished};
use sha2::Digest as _;
use support::{NoConverter, gzip, image, pod, serve_plain, serve_tls};

fn http_job(url: String) -> Job {
    Job {
        source: Source::Http(HttpSource {
            url,
            ..HttpSource::default()
        }),
        cert_dir: None,
        // 16 MiB asked for, the claim grown by the 0.055 overhead.
        image_size: Some((16 << 20) * 1055 / 1000 + 1),
        filesystem_overhead: "0.055".to_owned(),
        preallocation: false,
        checksum: None,
        owner_uid: None,
    }
}

fn finished(ended: Ended) -> Finished {
    match ended {
        Ended::Finished(finished) => finished,
        Ended::ChecksumMismatch(e) => panic!("unexpected mismatch: {e}"),
    }
}

fn complete() -> Finished {
    Finished {
        message: COMPLETE.to_owned(),
        ..Finished::default()
    }
}

#[tokio::test]
async fn a_compressed_image_lands_in_the_data_directory_grown_and_checked() {
    let server = serve_plain().await;
    let pod = pod(false);
    let sha256 = sha2::Sha256::digest(gzip(&image()))
        .iter()
        .fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
    let mut job = http_job(format!("http://{server}/images/disk.img.gz"));
    job.checksum = Some(Checksum::parse(&format!("sha256:{sha256}")).expect("checksum"));
    let ended = run::run(job, &pod.paths, NoConverter).await.expect("ran");
    assert_eq!(finished(ended), complete());
    assert_eq!(
        serde_json::to_string(&complete()).expect("json"),
        r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#
    );
    let disk = std::fs::read(pod.disk()).expect("disk.img");
    assert_eq!(disk.len(), 16 << 20, "grown to the size asked for");
    let owner = std::fs::metadata(pod.disk()).expect("disk.img").uid();
    let expected = if nix::unistd::geteuid().is_root() {
        run::QEMU_ID
    } else {
        nix::unistd::geteuid().as_raw()
    };
    assert_eq!(owner, expected, "written as root, handed to qemu's user");
    assert!(disk[..image().len()] == image()[..]);
}

#[tokio::test]
async fn a_checksum_mismatch_removes_the_disk() {
    let server = serve_plain().await;
    let pod = pod(false);
    let mut job = http_job(format!("http://{server}/images/disk.img"));
    job.checksum = Some(Checksum::parse(&format!("sha256:{}", "0".repeat(64))).expect("checksum"));
    let ended = run::run(job, &pod.paths, NoConverter).await.expect("ran");
    let Ended::ChecksumMismatch(mismatch) = ended else {
        panic!("expected a mismatch")
    };
    assert!(
        mismatch
            .to_string()
            .starts_with("checksum mismatch: expected sha256:000"),
        "{mismatch}"
    );
    assert!(!pod.disk().exists());
}

#[tokio::test]
async fn an_image_to_convert_without_scratch_asks_for_it_and_leaves_nothing() {
    let server = serve_plain().await;
    let pod = pod(false);
    let ended = run::run(
        http_job(format!("http://{server}/images/disk.vmdk")),
        &pod.paths,
        NoConverter,
    )
    .await
    .expect("ran");
    assert_eq!(
        finished(ended),
        Finished {
            scratch_space_required: true,
            ..complete()
        }
    );
    assert!(!pod.disk().exists());
}

#[tokio::test]
async fn a_block_device_is_the_target_when_attached() {
    let server = serve_plain().await;
    let pod = pod(false);
    std::fs::create_dir(pod.root.path().join("dev")).expect("dev");
    std::fs::write(&pod.paths.block_device, vec![0xff_u8; 8 << 20]).expect("device");
    let mut job = http_job(format!("http://{server}/images/disk.img"));
    job.preallocation = true;
    let ended = run::run(job, &pod.paths, NoConverter).await.expect("ran");
    assert!(finished(ended).preallocation_applied);
    let device = std::fs::read(&pod.paths.block_device).expect("device");
    assert_eq!(device.len(), 8 << 20);
    assert!(device[..image().len()] == image()[..]);
    assert!(
        device[image().len()..].iter().all(|&b| b == 0),
        "preallocation zeroed the rest"
    );
    assert!(!pod.disk().exists());
}

#[tokio::test]
async fn a_blank_disk_takes_the_size_asked_for_and_preallocation_allocates_it() {
    let pod = pod(false);
    // 4 MiB asked for, grown by the 0.055 overhead when the claim was made: 4 MiB on disk.
    let job = Job {
        source: Source::Blank,
        image_size: Some((4 << 20) * 1055 / 1000 + 1),
        preallocation: true,
        ..http_job(String::new())
    };
    let ended = run::run(job, &pod.paths, NoConverter).await.expect("ran");
    assert!(finished(ended).preallocation_applied);
    let metadata = std::fs::metadata(pod.disk()).expect("disk.img");
    assert_eq!(metadata.len(), 4 << 20);
    assert!(
        metadata.blocks() * 512 >= 4 << 20,
        "allocated: {} blocks",
        metadata.blocks()
    );
}

#[tokio::test]
async fn failures_end_with_upstreams_termination_message() {
    let server = serve_plain().await;
    let pod = pod(true);
    let error = run::run(http_job(format!("http://{server}/missing")), &pod.paths, NoConverter)
        .await
        .expect_err("404");
    assert_eq!(
        error.termination_message(),
        format!("Unable to process data: GET http://{server}/missing: HTTP 404 Not Found")
    );
    let mut job = http_job(format!("http://{server}/images/disk.img"));
    job.cert_dir = Some(pod.root.path().join("no-such-dir"));
    let error = run::run(job, &pod.paths, NoConverter)
        .await
        .expect_err("no certificates");
    assert!(error.to_string().starts_with("reading certificates in "), "{error}");
    assert!(!pod.disk().exists());
}

#[tokio::test]
async fn the_cert_dir_of_a_configmap_is_trusted() {
    let (server, pem) = serve_tls().await;
    let pod = pod(false);
    let certs = pod.root.path().join("certs");
    std::fs::create_dir_all(certs.join("..data")).expect("certs");
    std::fs::write(certs.join("ca.pem"), pem).expect("ca");
    let mut job = http_job(format!("https://localhost:{}/images/disk.img", server.port()));
    job.cert_dir = Some(certs);
    let ended = run::run(job, &pod.paths, NoConverter).await.expect("ran");
    assert_eq!(finished(ended), complete());
    assert!(pod.disk().exists());
}

//! The registry source against a registry on the loopback: the disk is found in the image's
//! layers and imported, whatever the challenge, the index or the redirects; each failure is named
//! in upstream's words and leaves no disk.

mod support;

use cdi_importer::job::{Job, Source};
use cdi_importer::registry::RegistrySource;
use cdi_importer::run::{self, Ended, Finished};
use pretty_assertions::assert_eq;
use support::fake_registry::{Auth, FakeRegistry, OCI_INDEX, layer};
use support::{NoConverter, Pod, gzip, image, pod};

fn job(source: RegistrySource) -> Job {
    Job {
        source: Source::Registry(source),
        cert_dir: None,
        image_size: Some(16 << 20),
        filesystem_overhead: "0".to_owned(),
        preallocation: false,
        checksum: None,
        owner_uid: None,
    }
}

fn source(registry: &FakeRegistry, image: &str) -> RegistrySource {
    RegistrySource {
        url: format!("docker://{}/{image}", registry.address),
        // The fake registry speaks plain http, as a registry in insecureRegistries may.
        insecure: true,
        ..RegistrySource::default()
    }
}

async fn import(source: RegistrySource) -> (Pod, Result<Ended, String>) {
    let pod = pod(true);
    let ended = run::run(job(source), &pod.paths, NoConverter)
        .await
        .map_err(|e| e.termination_message());
    (pod, ended)
}

fn assert_imported(pod: &Pod, ended: Result<Ended, String>) {
    match ended {
        Ok(Ended::Finished(Finished {
            scratch_space_required: false,
            ..
        })) => {}
        other => panic!("not imported: {other:?}"),
    }
    let disk = std::fs::read(pod.paths.data_dir.join("disk.img")).expect("disk.img");
    assert_eq!(disk.len(), 16 << 20, "grown to the size asked for");
    assert!(disk[..image().len()] == image()[..], "the image's bytes");
    let scratch: Vec<_> = std::fs::read_dir(&pod.paths.scratch_dir).expect("scratch").collect();
    assert!(scratch.is_empty(), "nothing left in scratch: {scratch:?}");
}

fn assert_failed(pod: &Pod, ended: Result<Ended, String>, expected: &str) {
    let message = ended.expect_err(expected);
    assert!(message.starts_with("Unable to process data: "), "{message}");
    assert!(message.contains(expected), "{message:?} should say {expected:?}");
    assert!(!pod.paths.data_dir.join("disk.img").exists(), "no disk left");
}

#[tokio::test]
async fn the_disk_is_taken_from_the_first_layer_that_has_one() {
    let registry = FakeRegistry::start(Auth::Anonymous).await;
    let boot = gzip(&layer(&[("boot/vmlinuz", b"kernel"), ("disk/.wh.old.img", b"")]));
    let disk = gzip(&layer(&[
        ("etc/hostname", b"x"),
        ("disk/disk.img", &image()),
        ("disk/second.img", b"no"),
    ]));
    registry.image("disks/raw", "v1", "amd64", "{}", vec![boot, disk]);
    let (pod, ended) = import(source(&registry, "disks/raw:v1")).await;
    assert_imported(&pod, ended);
}

#[tokio::test]
async fn a_bearer_challenge_is_met_and_no_credential_follows_a_redirect_elsewhere() {
    let auth = Auth::Bearer {
        user: "puller".to_owned(),
        password: "s3cret".to_owned(),
    };
    let registry = FakeRegistry::start(auth).await;
    registry.redirect_blobs().await;
    let digest = registry.image(
        "private/disk",
        "latest",
        "amd64",
        "{}",
        vec![layer(&[("disk/d.img", &image())])],
    );
    let mut with_credentials = source(&registry, "private/disk");
    with_credentials.credentials = Some(("puller".to_owned(), "s3cret".to_owned()));
    let (pod, ended) = import(with_credentials.clone()).await;
    assert_imported(&pod, ended);
    let log = registry.log();
    let token_request = log
        .iter()
        .find(|(path, _)| path.starts_with("/token"))
        .expect("a token request");
    assert_eq!(
        token_request.0,
        "/token?service=fake-registry&scope=repository%3Aprivate%2Fdisk%3Apull"
    );
    let manifest = log
        .iter()
        .find(|(path, _)| path.ends_with("/manifests/latest") && path.starts_with("/v2/"))
        .expect("the manifest");
    assert_eq!(manifest.1.as_deref(), Some("Bearer a-token-1"));
    let elsewhere: Vec<_> = log.iter().filter(|(path, _)| path.starts_with("other/")).collect();
    assert!(!elsewhere.is_empty(), "blobs were redirected: {log:?}");
    assert!(
        elsewhere.iter().all(|(_, auth)| auth.is_none()),
        "credentials leaked: {elsewhere:?}"
    );

    // By digest too.
    let mut by_digest = with_credentials.clone();
    by_digest.url = format!("docker://{}/private/disk@{digest}", registry.address);
    let (pod, ended) = import(by_digest).await;
    assert_imported(&pod, ended);

    let mut wrong = with_credentials;
    wrong.credentials = Some(("puller".to_owned(), "wrong".to_owned()));
    let (pod, ended) = import(wrong).await;
    assert_failed(&pod, ended, "authenticating to 127.0.0.1:");
}

#[tokio::test]
async fn basic_auth_is_sent_when_the_registry_asks_for_it() {
    let auth = Auth::Basic {
        user: "u".to_owned(),
        password: "p".to_owned(),
    };
    let registry = FakeRegistry::start(auth).await;
    registry.image(
        "basic/disk",
        "latest",
        "amd64",
        "{}",
        vec![gzip(&layer(&[("disk/d.img", &image())]))],
    );
    let (pod, ended) = import(source(&registry, "basic/disk")).await;
    assert_failed(
        &pod,
        ended,
        "the registry wants credentials: set the source's secretRef",
    );
    let mut with_credentials = source(&registry, "basic/disk");
    with_credentials.credentials = Some(("u".to_owned(), "p".to_owned()));
    let (pod, ended) = import(with_credentials).await;
    assert_imported(&pod, ended);
}

#[tokio::test]
async fn an_index_gives_the_platform_asked_for() {
    let registry = FakeRegistry::start(Auth::Anonymous).await;
    let arm = registry.image(
        "multi/disk",
        "arm",
        "arm64",
        "{}",
        vec![layer(&[("disk/d.img", &image())])],
    );
    let amd = registry.image(
        "multi/disk",
        "amd",
        "amd64",
        "{}",
        vec![layer(&[("disk/d.img", b"not this one")])],
    );
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{amd}","size":1,"platform":{{"architecture":"amd64","os":"linux"}}}},
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{arm}","size":1,"platform":{{"architecture":"arm64","os":"linux"}}}}]}}"#
    );
    registry.manifest("multi/disk", "latest", OCI_INDEX, index.as_bytes());
    let mut arm64 = source(&registry, "multi/disk");
    arm64.architecture = Some("arm64".to_owned());
    let (pod, ended) = import(arm64).await;
    assert_imported(&pod, ended);

    let mut s390x = source(&registry, "multi/disk");
    s390x.architecture = Some("s390x".to_owned());
    let (pod, ended) = import(s390x).await;
    assert_failed(&pod, ended, "no image in the manifest list for linux/s390x");

    let mut mismatch = source(&registry, "multi/disk:amd");
    mismatch.architecture = Some("arm64".to_owned());
    let (pod, ended) = import(mismatch).await;
    assert_failed(
        &pod,
        ended,
        r#"Error validating architecture: manifest image architecture: "amd64" doesn't match requested architecture: "arm64""#,
    );
}

#[tokio::test]
async fn each_failure_is_named_and_leaves_no_disk() {
    let registry = FakeRegistry::start(Auth::Anonymous).await;
    registry.image(
        "nodisk/image",
        "latest",
        "amd64",
        "{}",
        vec![
            layer(&[("boot/vmlinuz", b"k")]),
            b"not a tar at all, not even compressed".repeat(40),
        ],
    );
    registry.image(
        "bootc/image",
        "latest",
        "amd64",
        r#"{"containers.bootc":"1"}"#,
        vec![layer(&[("disk/d.img", &image())])],
    );
    let cases = [
        (
            "missing/image:v9",
            "Failed to read registry image: reading manifest v9 in 127.0.0.1:",
        ),
        ("missing/image:v9", "HTTP 404 Not Found: manifest unknown"),
        (
            "nodisk/image",
            "Failed to find VM disk image file in the container image",
        ),
        ("bootc/image", "bootc image detected"),
    ];
    for (image, expected) in cases {
        let (pod, ended) = import(source(&registry, image)).await;
        assert_failed(&pod, ended, expected);
    }

    // Plain http is tried only for an insecure registry.
    let mut secure = source(&registry, "nodisk/image");
    secure.insecure = false;
    let (pod, ended) = import(secure).await;
    assert_failed(
        &pod,
        ended,
        &format!(
            "Failed to read registry image: connecting to 127.0.0.1:{}",
            registry.address.port()
        ),
    );
}

#[tokio::test]
async fn without_scratch_space_nothing_is_pulled_and_the_pod_asks_for_it() {
    let registry = FakeRegistry::start(Auth::Anonymous).await;
    let pod = pod(false);
    let ended = run::run(job(source(&registry, "any/image")), &pod.paths, NoConverter)
        .await
        .expect("ran");
    match ended {
        Ended::Finished(finished) => assert!(finished.scratch_space_required),
        Ended::ChecksumMismatch(e) => panic!("{e}"),
    }
    assert_eq!(registry.log(), [], "nothing fetched");
}

#[tokio::test]
async fn a_token_that_runs_out_is_fetched_again() {
    let auth = Auth::Bearer {
        user: "puller".to_owned(),
        password: "s3cret".to_owned(),
    };
    let registry = FakeRegistry::start(auth).await;
    registry.state.lock().expect("state").token_uses = Some(2);
    let boot = gzip(&layer(&[("boot/vmlinuz", b"kernel")]));
    let disk = gzip(&layer(&[("disk/d.img", &image())]));
    registry.image("expiring/disk", "latest", "amd64", "{}", vec![boot, disk]);
    let mut with_credentials = source(&registry, "expiring/disk");
    with_credentials.credentials = Some(("puller".to_owned(), "s3cret".to_owned()));
    let (pod, ended) = import(with_credentials).await;
    assert_imported(&pod, ended);
    let tokens = registry
        .log()
        .iter()
        .filter(|(path, _)| path.starts_with("/token"))
        .count();
    assert!(tokens >= 2, "the token was fetched again: {:?}", registry.log());
}

#[tokio::test]
async fn a_disk_in_a_directory_under_disk_fails_as_upstream_s_does() {
    let registry = FakeRegistry::start(Auth::Anonymous).await;
    registry.image(
        "nested/disk",
        "latest",
        "amd64",
        "{}",
        vec![layer(&[("disk/sub/d.img", &image())])],
    );
    let (pod, ended) = import(source(&registry, "nested/disk")).await;
    assert_failed(&pod, ended, "image directory contains another directory");
}

#[tokio::test]
async fn the_image_s_kubevirt_environment_becomes_the_claim_s_labels() {
    let registry = FakeRegistry::start(Auth::Anonymous).await;
    let config = r#"{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin",
        "INSTANCETYPE_KUBEVIRT_IO_DEFAULT_INSTANCETYPE=u1.medium","INSTANCETYPE_KUBEVIRT_IO_DEFAULT_PREFERENCE=fedora"]},
        "rootfs":{"type":"layers","diff_ids":[]}}"#;
    registry.image_with_config(
        "labelled/disk",
        "latest",
        config.to_owned(),
        vec![layer(&[("disk/d.img", &image())])],
    );
    let (pod, ended) = import(source(&registry, "labelled/disk")).await;
    let Ok(Ended::Finished(finished)) = &ended else {
        panic!("not imported: {ended:?}")
    };
    assert_eq!(
        serde_json::to_value(finished).expect("json")["labels"],
        serde_json::json!({
            "instancetype.kubevirt.io/default-instancetype": "u1.medium",
            "instancetype.kubevirt.io/default-preference": "fedora"
        })
    );
    assert_imported(&pod, ended);
}

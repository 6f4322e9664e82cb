use pretty_assertions::assert_eq;

use super::*;

const NOW: i64 = 1_796_000_000;
const DAY: i64 = 24 * 60 * 60;

fn whole(now: i64) -> Stored {
    let client_ca = new_ca("cdi-uploadserver-client-signer", now).expect("client ca");
    Stored {
        server_ca: Some(new_ca("cdi-uploadserver-signer", now).expect("server ca")),
        client_cert: Some(client_cert(&client_ca, now).expect("client cert")),
        client_ca: Some(client_ca),
    }
}

#[test]
fn nothing_stored_makes_everything_and_a_fresh_set_is_kept() {
    let all = Needs {
        server_ca: true,
        client_ca: true,
        client_cert: true,
    };
    assert_eq!(decide(&Stored::default(), NOW), all);
    assert_eq!(decide(&whole(NOW), NOW), Needs::default());
    assert_eq!(decide(&whole(NOW), NOW + 300 * DAY), Needs::default(), "within a year");
    assert_eq!(decide(&whole(NOW), NOW + 400 * DAY), all, "due");
}

#[test]
fn a_client_certificate_of_another_ca_or_a_broken_one_is_made_again() {
    let mut stored = whole(NOW);
    let other = new_ca("another", NOW).expect("ca");
    stored.client_cert = Some(client_cert(&other, NOW).expect("cert"));
    assert_eq!(
        decide(&stored, NOW),
        Needs {
            client_cert: true,
            ..Needs::default()
        }
    );
    let mut broken = whole(NOW);
    if let Some(ca) = broken.server_ca.as_mut() {
        ca.key = "not a key".to_owned();
    }
    assert_eq!(
        decide(&broken, NOW),
        Needs {
            server_ca: true,
            ..Needs::default()
        }
    );
}

#[test]
fn a_serving_certificate_names_the_service_and_is_signed_by_the_server_ca() {
    let stored = whole(time::OffsetDateTime::now_utc().unix_timestamp());
    let pki = UploadPki {
        server_ca: stored.server_ca.clone().expect("ca"),
        client_ca_cert: stored.client_ca.clone().expect("client ca").cert,
    };
    let names = [
        "cdi-upload-disk.vms.svc".to_owned(),
        "cdi-upload-disk.vms.svc.cluster.local".to_owned(),
    ];
    let issued = pki.issue(&names).expect("issued");
    let facts = CertFacts::from_pem(&issued.cert).expect("pem").remove(0);
    let ca = CertFacts::from_pem(&pki.server_ca.cert).expect("pem").remove(0);
    assert_eq!(facts.common_name, "cdi-upload-disk.vms.svc");
    assert_eq!(facts.issuer_common_name, ca.common_name);
    assert!(ca.common_name.starts_with("cdi-uploadserver-signer@"));
    assert!(facts.not_after - facts.not_before <= SERVER_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS);
    assert_eq!(issued.client_ca, pki.client_ca_cert);
}

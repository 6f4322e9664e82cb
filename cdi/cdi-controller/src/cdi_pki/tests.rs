use pretty_assertions::assert_eq;

use super::*;
use control_loop::tls::CertFacts;

#[test]
fn a_serving_certificate_names_the_service_and_is_signed_by_the_server_ca() {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let pki = UploadPki {
        server_ca: issue::new_ca(&format!("cdi-uploadserver-signer@{now}"), now, now + 3600).expect("ca"),
        server_bundle: "SERVER BUNDLE".to_owned(),
        client_ca: issue::new_ca(&format!("cdi-uploadserver-client-signer@{now}"), now, now + 3600).expect("client ca"),
        client_bundle: "CLIENT BUNDLE".to_owned(),
        token_public_key: Vec::new(),
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
    assert_eq!(
        issued.client_ca, "CLIENT BUNDLE",
        "the upload server trusts every live client CA"
    );
    let client = pki.issue_client("src/disk-dst/copy").expect("client");
    let facts = CertFacts::from_pem(&client.cert).expect("pem").remove(0);
    let client_ca = CertFacts::from_pem(&pki.client_ca.cert).expect("pem").remove(0);
    assert_eq!(facts.common_name, "src/disk-dst/copy");
    assert_eq!(facts.issuer_common_name, client_ca.common_name);
    assert_eq!(
        client.server_ca, "SERVER BUNDLE",
        "the client trusts every live server CA"
    );
}

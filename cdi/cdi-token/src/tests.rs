use pretty_assertions::assert_eq;

use super::*;

fn issuer() -> Issuer {
    Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, UPLOAD_LIFETIME_SECONDS).expect("issuer")
}

#[test]
fn a_token_carries_its_payload_for_five_minutes() {
    let issuer = issuer();
    let validator = Validator::new(&issuer.public_key(), UPLOAD_ISSUER, 5);
    let token = issuer.issue(&Payload::upload("vms", "disk"), 1_000);
    let payload = validator.validate(&token, 1_000).expect("valid");
    assert_eq!(payload, Payload::upload("vms", "disk"));
    assert_eq!(payload.resource.resource, "persistentvolumeclaims");
    assert!(validator.validate(&token, 1_000 + 300).is_ok());
    assert!(validator.validate(&token, 1_000 + 305).is_ok(), "within the leeway");
    assert_eq!(validator.validate(&token, 1_000 + 306), Err(TokenError::Expired));
    assert_eq!(validator.validate(&token, 1_000 - 6), Err(TokenError::NotYet));
}

#[test]
fn forged_altered_or_foreign_tokens_are_refused() {
    let issuer = issuer();
    let validator = Validator::new(&issuer.public_key(), UPLOAD_ISSUER, 0);
    let token = issuer.issue(&Payload::upload("vms", "disk"), 1_000);

    // Another key's token.
    let other = self::issuer().issue(&Payload::upload("vms", "disk"), 1_000);
    assert_eq!(validator.validate(&other, 1_000), Err(TokenError::Forged));

    // The claims changed to another claim, the signature kept.
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("base64")).expect("json");
    claims["name"] = serde_json::json!("someone-elses-disk");
    let altered = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).expect("json")),
        parts[2]
    );
    assert_eq!(validator.validate(&altered, 1_000), Err(TokenError::Forged));

    // Another issuer, with the right key.
    let clone_issuer = Issuer::new(&generate_key().expect("key"), "cdi-clone", 300).expect("issuer");
    let clone_validator = Validator::new(&clone_issuer.public_key(), UPLOAD_ISSUER, 0);
    let foreign = clone_issuer.issue(&Payload::upload("vms", "disk"), 1_000);
    assert_eq!(
        clone_validator.validate(&foreign, 1_000),
        Err(TokenError::Issuer("cdi-clone".to_owned()))
    );

    for malformed in [
        "",
        "a.b",
        "a.b.c.d",
        "!!.??.##",
        &format!("{}.{}.{}", parts[0], "e30", ""),
    ] {
        assert!(
            matches!(
                validator.validate(malformed, 1_000),
                Err(TokenError::Malformed(_) | TokenError::Forged)
            ),
            "{malformed:?}"
        );
    }
    let none_alg = format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        parts[1],
        ""
    );
    assert_eq!(
        validator.validate(&none_alg, 1_000),
        Err(TokenError::Malformed("the algorithm is not EdDSA"))
    );
}

#[test]
fn a_bad_key_is_named() {
    assert!(Issuer::new(b"not a key", UPLOAD_ISSUER, 300).is_err());
}

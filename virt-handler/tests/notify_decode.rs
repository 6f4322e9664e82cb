//! The notify decoders on hostile input: random bytes, and seeds (valid requests) truncated and
//! flipped as a fuzzer's first mutations would be. Never a panic; valid seeds decode.

use cmd_protocol::notify::{DomainEventRequest, K8sEventRequest};
use proptest::prelude::*;
use virt_handler::notify_server::decode_untrusted;

fn seeds() -> Vec<Vec<u8>> {
    let domain = br#"{"metadata":{"name":"default_vm","namespace":"default","uid":"u","gracePeriodSeconds":30},"spec":{"hasAcpi":true,"machine":"pc-q35-7.2","interfaces":[{"name":"default","mac":"52:54:00:00:00:01"}]},"status":{"status":"Running","reason":"Unknown"}}"#;
    let event = br#"{"metadata":{},"involvedObject":{"namespace":"default","name":"vm"},"type":"Normal","reason":"Started","message":"m"}"#;
    vec![
        prost::Message::encode_to_vec(&DomainEventRequest {
            domain_json: domain.to_vec(),
            status_json: Vec::new(),
            event_type: "ADDED".to_owned(),
        }),
        prost::Message::encode_to_vec(&K8sEventRequest {
            event_json: event.to_vec(),
        }),
    ]
}

#[test]
fn valid_seeds_decode_and_their_mutations_never_panic() {
    for seed in seeds() {
        assert_eq!(decode_untrusted(&seed), Ok(()));
        for cut in 0..seed.len() {
            let _ = decode_untrusted(&seed[..cut]);
            let mut flipped = seed.clone();
            flipped[cut] ^= 0x41;
            let _ = decode_untrusted(&flipped);
        }
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_untrusted(&bytes);
    }
}

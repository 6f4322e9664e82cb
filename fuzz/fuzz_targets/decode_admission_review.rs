//! Untrusted AdmissionReview bodies on virt-api's webhooks: every webhook must answer (allowed,
//! 422 or 400) and never panic, whatever the bytes.
#![no_main]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use virt_api::admission::lookup::NoCluster;
use virt_api::admission::{AdmissionContext, Webhook, admit};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let context = AdmissionContext { config: Default::default(), install_namespace: "kubevirt".to_owned() };
    let no_cluster = NoCluster("fuzzing".to_owned());
    let uuid = || "00000000-0000-0000-0000-000000000000".to_owned();
    for hook in Webhook::ALL {
        let _ = futures::executor::block_on(admit(hook, data, &context, Time(Default::default()), &uuid, &no_cluster));
    }
});

//! Untrusted bytes on the launcher's command socket: the VMIRequest decoder must never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = cmd_protocol::domain::decode_vmi_request(data);
});

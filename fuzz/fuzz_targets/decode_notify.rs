//! Untrusted bytes on virt-handler's notify socket: the event decoders must never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = virt_handler::notify_server::decode_untrusted(data);
});

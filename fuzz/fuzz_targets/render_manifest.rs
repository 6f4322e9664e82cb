//! Untrusted manifest bytes -> VMI -> domain XML: must never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    virt_launcher::fuzzing::render_untrusted(data);
});

//! Untrusted manifest bytes -> VMI -> domain XML: must never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    domain_xml::fuzzing::render_untrusted(data);
});

//! The body of the `render_manifest` fuzz target (`fuzz/`): untrusted manifest bytes through the
//! whole render path. It lives in the library so a normal test can run it over a seed corpus.

use std::path::Path;

use kubevirt_api::Manifest;

use crate::{ConvertContext, DomainType, render};

/// Parses `data` as a manifest and renders it. Any outcome but a panic is acceptable.
pub fn render_untrusted(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let origin = Path::new("fuzz.yaml");
    let Ok(vmi) = Manifest::parse(text, origin).and_then(|m| m.into_vmi(origin)) else {
        return;
    };
    let ctx = ConvertContext::assuming_container_disk_format(DomainType::Qemu, &vmi, "qcow2");
    if let Ok(domain) = render(&vmi, &ctx) {
        let _ = domain.to_xml();
    }
}

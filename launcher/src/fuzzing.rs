//! The body of the `render_manifest` fuzz target (`fuzz/`): untrusted manifest bytes through the
//! whole render path. It lives in the library so a normal test can run it over a seed corpus.

use std::path::Path;

use kubevirt_api::Manifest;

use crate::domain::{ConvertContext, DomainType, render};

/// Parses `data` as a manifest and renders it. Any outcome but a panic is acceptable.
pub fn render_untrusted(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let origin = Path::new("fuzz.yaml");
    let Ok(vmi) = Manifest::parse(text, origin).and_then(|m| m.into_vmi(origin)) else {
        return;
    };
    let mut ctx = ConvertContext {
        domain_type: DomainType::Qemu,
        ..ConvertContext::default()
    };
    for volume in vmi.spec.volumes.iter().filter(|v| v.container_disk.is_some()) {
        ctx.container_disk_formats
            .insert(volume.name.clone(), "qcow2".to_owned());
    }
    if let Ok(domain) = render(&vmi, &ctx) {
        let _ = domain.to_xml();
    }
}

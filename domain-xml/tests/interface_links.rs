//! The pod network's MAC and MTU reach the domain the same way whether they are known when the
//! domain is rendered (cluster mode) or set on a domain rendered before the network existed
//! (local mode renders once, before it creates anything).

use std::collections::BTreeMap;
use std::path::Path;

use domain_xml::{ConvertContext, DomainType, InterfaceLink, InterfaceTaps, apply_interface_links, render};
use kubevirt_api::Manifest;
use pretty_assertions::assert_eq;

#[test]
fn links_set_after_rendering_give_the_domain_rendering_with_them_gives() {
    for example in [
        "vmi-testguest-masquerade.yaml",
        "vmi-testguest-bridge.yaml",
        "vmi-multi-disk-nic.yaml",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../manifests/examples")
            .join(example);
        let vmi = Manifest::from_path(&path)
            .and_then(|m| m.into_vmi(&path))
            .expect("example");
        let links: BTreeMap<String, InterfaceLink> = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .enumerate()
            .map(|(i, iface)| {
                let link = InterfaceLink {
                    mac: format!("02:00:00:00:00:{i:02x}"),
                    mtu: 1400 + u32::try_from(i).expect("index"),
                };
                (iface.name.clone(), link)
            })
            .collect();
        assert!(!links.is_empty(), "{example} has interfaces");
        let base = ConvertContext {
            interface_taps: InterfaceTaps::PreCreated,
            ..ConvertContext::assuming_container_disk_format(DomainType::Qemu, &vmi, "qcow2")
        };
        let at_render = render(
            &vmi,
            &ConvertContext {
                interface_links: links.clone(),
                ..base.clone()
            },
        )
        .expect("render with links");
        let mut afterwards = render(&vmi, &base).expect("render without links");
        assert_ne!(afterwards.to_xml().expect("xml"), at_render.to_xml().expect("xml"));
        apply_interface_links(&mut afterwards, &links);
        assert_eq!(
            afterwards.to_xml().expect("xml"),
            at_render.to_xml().expect("xml"),
            "{example}"
        );
    }
}

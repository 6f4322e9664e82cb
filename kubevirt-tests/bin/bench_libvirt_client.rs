//! The smallest libvirt client the `virt` crate allows, as a floor for the launcher's memory: it
//! links libvirt.so, registers libvirt's event loop, connects to a daemon, lists its domains and
//! then prints its own `Rss`, `Pss` and `Anonymous` (KiB, from `/proc/self/smaps_rollup`) as
//! `rss=<n> pss=<n> anon=<n>`.
//!
//! `bench-launcher` runs it against each launcher's private libvirtd while the guest runs.
//!
//! Usage: `bench-libvirt-client <libvirt URI>`

use anyhow::{Context, bail};
use kubevirt_tests::process_memory::field_kib;
use virt::connect::Connect;

fn smaps_field(text: &str, name: &str) -> anyhow::Result<u64> {
    field_kib(text, name).with_context(|| format!("no {name} in /proc/self/smaps_rollup"))
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(uri), None) = (args.next(), args.next()) else {
        bail!("usage: bench-libvirt-client <libvirt URI>");
    };
    virt::error::clear_error_callback();
    virt::event::event_register_default_impl().context("cannot register libvirt's event loop")?;
    let conn = Connect::open(Some(&uri)).with_context(|| format!("cannot connect to {uri}"))?;
    let domains = conn.list_all_domains(0).context("cannot list domains")?;
    if domains.is_empty() {
        bail!("{uri} has no domain: run this while a launcher's guest runs");
    }
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").context("cannot read /proc/self/smaps_rollup")?;
    println!(
        "rss={} pss={} anon={}",
        smaps_field(&text, "Rss:")?,
        smaps_field(&text, "Pss:")?,
        smaps_field(&text, "Anonymous:")?
    );
    Ok(())
}

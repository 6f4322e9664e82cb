//! Rendering a VMI into domain XML: a minimal VMI and a large one (16 disks, one interface, every
//! device kind). Targets on the 2-core reference machine: median <= 20 us and <= 200 us.

use criterion::{Criterion, criterion_group, criterion_main};
use domain_xml::fixtures::{large_vmi, minimal_vmi, vmi};
use domain_xml::{ConvertContext, DomainType, render};
use std::hint::black_box;

fn context(vmi: &kubevirt_api::v1::VirtualMachineInstance) -> ConvertContext {
    ConvertContext::assuming_container_disk_format(DomainType::Qemu, vmi, "qcow2")
}

fn bench_render(c: &mut Criterion) {
    for (name, value) in [("render_minimal_vmi", minimal_vmi()), ("render_large_vmi", large_vmi())] {
        let vmi = vmi(value);
        let ctx = context(&vmi);
        c.bench_function(name, |b| {
            b.iter(|| {
                let domain = render(black_box(&vmi), black_box(&ctx)).expect("fixture renders");
                domain.to_xml().expect("fixture serializes")
            });
        });
    }
}

criterion_group!(benches, bench_render);
criterion_main!(benches);

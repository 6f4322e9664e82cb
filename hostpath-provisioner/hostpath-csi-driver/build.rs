//! Generates the CSI and kubelet plugin registration messages, services and clients from
//! `proto/` with protox (no protoc is needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
    println!("cargo:rerun-if-changed=proto/registration.proto");
    let descriptors = protox::compile(["csi.proto", "registration.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}

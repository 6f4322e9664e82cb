//! Compiles the kubelet's device plugin API with protox (no protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = "proto/deviceplugin.proto";
    println!("cargo:rerun-if-changed={file}");
    let descriptors = protox::compile([file], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}

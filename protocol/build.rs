//! Compiles the protocol's .proto files with protox (no protoc needed, deps.md P16).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/cmd.proto", "proto/info.proto", "proto/notify.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}

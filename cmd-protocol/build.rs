//! Compiles the protocol's .proto files with protox, so no protoc binary is needed
//! (docs/dependencies.md, "protox instead of protoc").

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

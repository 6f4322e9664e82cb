//! The install manifests as the component tests read them: a container's arguments from
//! `manifests/install`, with `$(VAR)` references filled in as the kubelet would.

#![allow(dead_code)]

use serde_json::Value;

/// `manifests/install/<file>`, every document.
pub fn documents(file: &str) -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("manifests/install").is_dir())
        .expect("the repository root")
        .join("manifests/install");
    let text = std::fs::read_to_string(dir.join(file)).expect("manifest");
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).expect("YAML"))
        .collect()
}

/// The arguments of container `container` in `file`, with `$(NAME)` replaced by `env`'s values.
pub fn container_args(file: &str, container: &str, env: &[(&str, &str)]) -> Vec<String> {
    let docs = documents(file);
    let spec = docs
        .iter()
        .find_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()?
                .iter()
                .find(|c| c["name"] == container)
                .cloned()
        })
        .expect("the container");
    spec["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .map(|arg| {
            env.iter().fold(arg.to_owned(), |a, (name, value)| {
                a.replace(&format!("$({name})"), value)
            })
        })
        .collect()
}

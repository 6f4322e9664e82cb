//! Loading `VirtualMachine` and `VirtualMachineInstance` manifests from files a user names.
//!
//! A manifest on a command line is read strictly: a field the API does not know is an error that
//! names its path (`spec.domain.devices.disks[0].buss`), because a misspelt field silently ignored
//! is a VM configured differently from what its owner wrote. Objects read from the cluster are not
//! checked this way; the API server already pruned them against the CRD schema.
//!
//! YAML and JSON are both accepted (JSON is read as YAML 1.2). Parsing never panics; every failure
//! is a [`ManifestError`] that names the file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::v1::{API_VERSION, VirtualMachine, VirtualMachineInstance};

/// A manifest read from a file: a VMI, or a VM whose template describes one.
#[derive(Clone, Debug, PartialEq)]
pub enum Manifest {
    /// `kind: VirtualMachineInstance`.
    Vmi(Box<VirtualMachineInstance>),
    /// `kind: VirtualMachine`.
    Vm(Box<VirtualMachine>),
}

/// Why a manifest could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not valid YAML or JSON.
    #[error("{path}: not valid YAML or JSON: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with its line and column.
        message: String,
    },
    /// `apiVersion` and `kind` are not a kind this tool reads.
    #[error("{path}: unsupported object apiVersion {api_version:?} kind {kind:?}: expected {expected}")]
    UnsupportedKind {
        /// The file.
        path: PathBuf,
        /// The `apiVersion` found.
        api_version: String,
        /// The `kind` found.
        kind: String,
        /// What the file should hold.
        expected: String,
    },
    /// A field has the wrong type or a required field is missing.
    #[error("{path}: {field}: {message}")]
    InvalidField {
        /// The file.
        path: PathBuf,
        /// The field path, e.g. `spec.domain.cpu.cores`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// Fields the API does not define.
    #[error("{path}: unknown field {}", fields.join(", "))]
    UnknownFields {
        /// The file.
        path: PathBuf,
        /// Their paths.
        fields: Vec<String>,
    },
    /// A VM without `spec.template.spec`.
    #[error("{path}: spec.template.spec: a VirtualMachine needs a template to describe its VMI")]
    MissingTemplate {
        /// The file.
        path: PathBuf,
    },
}

impl Manifest {
    /// Reads and parses the manifest at `path`.
    pub fn from_path(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses manifest text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ManifestError> {
        let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| ManifestError::Syntax {
            path: origin.to_owned(),
            message: e.to_string(),
        })?;
        let api_version = value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default();
        let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or_default();
        match (api_version, kind) {
            (API_VERSION, "VirtualMachineInstance") => Ok(Self::Vmi(Box::new(from_value_strict(value, origin)?))),
            (API_VERSION, "VirtualMachine") => Ok(Self::Vm(Box::new(from_value_strict(value, origin)?))),
            _ => Err(ManifestError::UnsupportedKind {
                path: origin.to_owned(),
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                expected: format!("{API_VERSION} VirtualMachineInstance or VirtualMachine"),
            }),
        }
    }

    /// The VMI this manifest runs: the VMI itself, or the VM's template named after the VM, as
    /// virt-controller creates it.
    pub fn into_vmi(self, origin: &Path) -> Result<VirtualMachineInstance, ManifestError> {
        match self {
            Self::Vmi(vmi) => Ok(*vmi),
            Self::Vm(vm) => {
                let template = vm.spec.template;
                let spec = template.spec.ok_or_else(|| ManifestError::MissingTemplate {
                    path: origin.to_owned(),
                })?;
                let template_meta = template.metadata.unwrap_or_default();
                let mut vmi = VirtualMachineInstance::new(vm.metadata.name.as_deref().unwrap_or_default(), spec);
                vmi.metadata.namespace.clone_from(&vm.metadata.namespace);
                vmi.metadata.labels = template_meta.labels;
                vmi.metadata.annotations = template_meta.annotations;
                Ok(vmi)
            }
        }
    }
}

/// Deserializes `value` as `T`, failing on type errors and on fields `T` does not define.
pub(crate) fn from_value_strict<T: DeserializeOwned>(
    value: serde_json::Value,
    origin: &Path,
) -> Result<T, ManifestError> {
    let mut unknown = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| {
        let field = field_path(&path);
        // kube's generated resource types take apiVersion and kind from their impl, not a field.
        if field != "apiVersion" && field != "kind" {
            unknown.push(field);
        }
    };
    let ignoring = serde_ignored::Deserializer::new(value, &mut record);
    let typed: T = serde_path_to_error::deserialize(ignoring).map_err(|e| ManifestError::InvalidField {
        path: origin.to_owned(),
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })?;
    if unknown.is_empty() {
        Ok(typed)
    } else {
        Err(ManifestError::UnknownFields {
            path: origin.to_owned(),
            fields: unknown,
        })
    }
}

/// Formats a `serde_ignored` path the way upstream names fields: `a.b[2].c`.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    fn walk(path: &serde_ignored::Path<'_>, out: &mut String) {
        match path {
            serde_ignored::Path::Root => {}
            serde_ignored::Path::Seq { parent, index } => {
                walk(parent, out);
                let _ = write!(out, "[{index}]");
            }
            serde_ignored::Path::Map { parent, key } => {
                walk(parent, out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => walk(parent, out),
        }
    }
    let mut out = String::new();
    walk(path, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("vmi.yaml"))
    }

    const MINIMAL: &str = "
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: small}
spec:
  domain:
    devices:
      disks:
        - name: root
          disk: {bus: virtio}
";

    #[test]
    fn a_minimal_vmi_parses() {
        let Ok(Manifest::Vmi(vmi)) = parse(MINIMAL) else {
            panic!("expected a VMI")
        };
        assert_eq!(vmi.spec.domain.devices.disks[0].name, "root");
    }

    #[test]
    fn json_is_accepted_as_well_as_yaml() {
        let json = r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance",
            "metadata":{"name":"j"},"spec":{"domain":{"devices":{}}}}"#;
        assert!(matches!(parse(json), Ok(Manifest::Vmi(_))));
    }

    #[test]
    fn an_unknown_field_is_reported_with_its_path() {
        let text = MINIMAL.replace("disk: {bus: virtio}", "disk: {buss: virtio}");
        let err = parse(&text).expect_err("buss is not a field");
        assert_eq!(
            err.to_string(),
            "vmi.yaml: unknown field spec.domain.devices.disks[0].disk.buss"
        );
    }

    #[test]
    fn a_wrongly_typed_field_is_reported_with_its_path() {
        let text = MINIMAL.replace("devices:", "cpu: {cores: many}\n    devices:");
        let err = parse(&text).expect_err("cores must be a number");
        let ManifestError::InvalidField { field, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(field, "spec.domain.cpu.cores");
    }

    #[test]
    fn a_foreign_kind_is_rejected_by_name() {
        let err = parse("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n").expect_err("a Pod");
        assert!(err.to_string().contains("kind \"Pod\""), "{err}");
    }

    #[test]
    fn broken_yaml_is_a_syntax_error_naming_the_file() {
        let err = parse("spec: [unclosed").expect_err("broken");
        assert!(matches!(err, ManifestError::Syntax { .. }), "{err}");
        assert!(err.to_string().starts_with("vmi.yaml: "), "{err}");
    }

    #[test]
    fn a_vm_becomes_the_vmi_of_its_template() {
        let text = "
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: web, namespace: prod}
spec:
  runStrategy: Always
  template:
    metadata: {labels: {app: web}}
    spec: {domain: {devices: {}}}
";
        let vmi = parse(text)
            .and_then(|m| m.into_vmi(Path::new("vm.yaml")))
            .expect("valid VM");
        assert_eq!(vmi.metadata.name.as_deref(), Some("web"));
        assert_eq!(vmi.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(
            vmi.metadata.labels.unwrap_or_default().get("app").map(String::as_str),
            Some("web")
        );
    }

    #[test]
    fn a_vm_without_a_template_spec_cannot_become_a_vmi() {
        let text = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: x}\nspec: {template: {}}\n";
        let err = parse(text)
            .and_then(|m| m.into_vmi(Path::new("vm.yaml")))
            .expect_err("no template spec");
        assert!(matches!(err, ManifestError::MissingTemplate { .. }));
    }

    proptest::proptest! {
        #[test]
        fn parsing_arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn parsing_arbitrary_edits_of_a_valid_manifest_never_panics(
            at in 0usize..MINIMAL.len(),
            insert in "[-:{}\\[\\] a-z0-9\n]{0,12}",
        ) {
            let mut text = MINIMAL.to_owned();
            if text.is_char_boundary(at) {
                text.insert_str(at, &insert);
            }
            let _ = parse(&text);
        }
    }
}

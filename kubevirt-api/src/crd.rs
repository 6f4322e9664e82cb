//! CustomResourceDefinitions generated from the types, and their committed YAML form.
//!
//! `crdgen` writes [`render_all`] into `manifests/crds/`; a test fails when the committed files
//! differ from what the types generate, so the schema the API server enforces never drifts from the
//! code.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;
use schemars::JsonSchema;

use crate::instancetype::{
    KindNames, VirtualMachineClusterInstancetype, VirtualMachineClusterPreference, VirtualMachineInstancetype,
    VirtualMachineInstancetypeSpec, VirtualMachinePreference, VirtualMachinePreferenceSpec,
};
use crate::migrations::MigrationPolicy;
use crate::v1::{KubeVirt, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};

/// Why a CRD could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// YAML serialization failed.
    #[error("cannot render CRD {name} as YAML")]
    Render {
        /// The CRD's name.
        name: String,
        /// The serializer's error.
        source: serde_saphyr::ser::Error,
    },
}

/// Every CRD this project installs.
#[must_use]
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        VirtualMachineInstance::crd(),
        VirtualMachine::crd(),
        VirtualMachineInstanceMigration::crd(),
        KubeVirt::crd(),
        MigrationPolicy::crd(),
        instancetype_crd::<VirtualMachineInstancetypeSpec>(VirtualMachineInstancetype::NAMES),
        instancetype_crd::<VirtualMachineInstancetypeSpec>(VirtualMachineClusterInstancetype::NAMES),
        instancetype_crd::<VirtualMachinePreferenceSpec>(VirtualMachinePreference::NAMES),
        instancetype_crd::<VirtualMachinePreferenceSpec>(VirtualMachineClusterPreference::NAMES),
    ]
}

/// The structural schema of `T`, made the way kube's derive makes it.
fn structural_schema<T: JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_default()
}

/// The CRD of an `instancetype.kubevirt.io` kind whose spec is `S`: `v1beta1` served and stored,
/// upstream's names, no status.
fn instancetype_crd<S: JsonSchema>(names: KindNames) -> CustomResourceDefinition {
    let mut spec = structural_schema::<S>();
    if let Some(object) = spec.as_object_mut() {
        object.remove("title");
    }
    let root = serde_json::json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        },
        "required": ["spec"],
    });
    let schema: Option<JSONSchemaProps> = serde_json::from_value(root).ok();
    let group = crate::instancetype::GROUP;
    let list =
        |items: &[&str]| Some(items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).filter(|v| !v.is_empty());
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{group}", names.plural)),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: group.to_owned(),
            names: CustomResourceDefinitionNames {
                categories: list(names.categories),
                kind: names.kind.to_owned(),
                plural: names.plural.to_owned(),
                short_names: list(names.short_names),
                singular: Some(names.singular.to_owned()),
                ..CustomResourceDefinitionNames::default()
            },
            scope: if names.namespaced { "Namespaced" } else { "Cluster" }.to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: crate::instancetype::VERSION.to_owned(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: schema,
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

/// One generated file: its name under `manifests/crds/` and its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedCrd {
    /// `<plural>.<group>.yaml`.
    pub file_name: String,
    /// The YAML document.
    pub yaml: String,
}

/// Renders every CRD as YAML with a header saying it is generated.
pub fn render_all() -> Result<Vec<RenderedCrd>, CrdError> {
    all().iter().map(render).collect()
}

fn render(crd: &CustomResourceDefinition) -> Result<RenderedCrd, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let body = serde_saphyr::to_string(crd).map_err(|source| CrdError::Render {
        name: name.clone(),
        source,
    })?;
    Ok(RenderedCrd {
        file_name: format!("{name}.yaml"),
        yaml: format!("# Generated by `cargo run -p kubevirt-api --bin crdgen`. Do not edit.\n{body}"),
    })
}

//! The four kinds of `instancetype.kubevirt.io/v1beta1`. A namespaced and a cluster-wide kind share
//! each spec, which kube's derive cannot express, so the kinds are written out by a macro here and
//! their CRDs are built in [`crate::crd`].

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::Resource;
use serde::{Deserialize, Serialize};

use super::{GROUP, VERSION, VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};

/// Names and scope of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindNames {
    /// `VirtualMachineInstancetype`, ...
    pub kind: &'static str,
    /// The resource name.
    pub plural: &'static str,
    /// The singular name.
    pub singular: &'static str,
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Namespaced (true) or cluster-wide.
    pub namespaced: bool,
    /// kubectl categories.
    pub categories: &'static [&'static str],
}

macro_rules! instancetype_kind {
    ($(#[$doc:meta])* $name:ident, $spec:ty, $scope:ty, $names:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// `instancetype.kubevirt.io/v1beta1`.
            #[serde(default)]
            pub api_version: String,
            /// The kind.
            #[serde(default)]
            pub kind: String,
            /// Name, namespace, labels, generation and UID.
            #[serde(default)]
            pub metadata: ObjectMeta,
            /// What it gives a VM.
            pub spec: $spec,
        }

        impl $name {
            /// Names and scope of this kind.
            pub const NAMES: KindNames = $names;

            /// An object of this kind named `name`.
            #[must_use]
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    api_version: format!("{GROUP}/{VERSION}"),
                    kind: Self::NAMES.kind.to_owned(),
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        ..ObjectMeta::default()
                    },
                    spec,
                }
            }
        }

        impl Resource for $name {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(Self::NAMES.kind)
            }

            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }

            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }

            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(Self::NAMES.plural)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

instancetype_kind!(
    /// A namespaced instance type.
    VirtualMachineInstancetype,
    VirtualMachineInstancetypeSpec,
    NamespaceResourceScope,
    KindNames {
        kind: "VirtualMachineInstancetype",
        plural: "virtualmachineinstancetypes",
        singular: "virtualmachineinstancetype",
        short_names: &["vminstancetype", "vminstancetypes", "vmf", "vmfs"],
        namespaced: true,
        categories: &["all"],
    }
);

instancetype_kind!(
    /// A cluster-wide instance type.
    VirtualMachineClusterInstancetype,
    VirtualMachineInstancetypeSpec,
    ClusterResourceScope,
    KindNames {
        kind: "VirtualMachineClusterInstancetype",
        plural: "virtualmachineclusterinstancetypes",
        singular: "virtualmachineclusterinstancetype",
        short_names: &["vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"],
        namespaced: false,
        categories: &[],
    }
);

instancetype_kind!(
    /// A namespaced preference.
    VirtualMachinePreference,
    VirtualMachinePreferenceSpec,
    NamespaceResourceScope,
    KindNames {
        kind: "VirtualMachinePreference",
        plural: "virtualmachinepreferences",
        singular: "virtualmachinepreference",
        short_names: &["vmpref", "vmprefs", "vmp", "vmps"],
        namespaced: true,
        categories: &["all"],
    }
);

instancetype_kind!(
    /// A cluster-wide preference.
    VirtualMachineClusterPreference,
    VirtualMachinePreferenceSpec,
    ClusterResourceScope,
    KindNames {
        kind: "VirtualMachineClusterPreference",
        plural: "virtualmachineclusterpreferences",
        singular: "virtualmachineclusterpreference",
        short_names: &["vmcp", "vmcps"],
        namespaced: false,
        categories: &[],
    }
);

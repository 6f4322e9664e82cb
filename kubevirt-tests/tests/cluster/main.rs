//! End to end on the test cluster (`make cluster`: Kubernetes built from upstream, kubevirt-rs
//! installed through virt-operator: `kubectl apply -k manifests/operator` and its KubeVirt CR).
//! Everything goes through the real API server, webhooks, aggregation layer, scheduler, kubelet,
//! containerd and garbage collector, as a user's kubectl and virtctl do. Each test cleans up
//! what it made.
//!
//! They need the cluster, so they are ignored by a plain `cargo test`; `make test` brings the
//! cluster up and runs them (scripts/test-cluster.sh):
//! `cargo test -p kubevirt-tests --test cluster -- --ignored --test-threads=1`.

mod access_credentials;
mod admission;
mod block_import;
mod cdi_operator;
mod claim_populator;
mod claims;
mod clone;
mod cluster_configuration;
mod common_instancetypes;
mod config_volumes;
mod data_volumes;
mod dedicated_cpus;
mod diagnostics;
mod dns;
mod drain;
mod faults;
mod host_disk;
mod hostpath;
mod install;
mod instancetypes;
mod migration;
mod migration_policy;
mod persistent_state;
mod post_copy;
mod registry_import;
mod support;
mod template_validator;
mod unprivileged;
mod upgrade;
mod upload;
mod virt_operator;
mod virt_operator_certificates;
mod vm;
mod vmi;

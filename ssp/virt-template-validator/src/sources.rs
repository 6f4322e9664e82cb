//! Where a VirtualMachine's rules come from (upstream's order): none at all when it carries
//! `vm.kubevirt.io/skip-validations`; its own `vm.kubevirt.io/validations` when not empty
//! (they replace its template's); else the `validations` annotation of the template its labels,
//! or else its annotations, name with `vm.kubevirt.io/template` and
//! `vm.kubevirt.io/template.namespace` (or the older `vm.kubevirt.io/template-namespace`). Pure.

use serde_json::Value;

/// The annotation that turns validation off, whatever its value.
pub const SKIP: &str = "vm.kubevirt.io/skip-validations";
/// The VM's own rules.
pub const VM_RULES: &str = "vm.kubevirt.io/validations";
/// The template's rules.
pub const TEMPLATE_RULES: &str = "validations";
/// The template's name.
pub const TEMPLATE_NAME: &str = "vm.kubevirt.io/template";
/// The template's namespace.
pub const TEMPLATE_NAMESPACE: &str = "vm.kubevirt.io/template.namespace";
/// The template's namespace, as older VMs say it.
pub const OLD_TEMPLATE_NAMESPACE: &str = "vm.kubevirt.io/template-namespace";

/// Where the rules are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleSource {
    /// Nowhere: the VM is admitted as it is.
    Nothing,
    /// The VM's own annotation, this text.
    Own(String),
    /// The `validations` annotation of this template.
    Template {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// Where `vm`'s rules are.
#[must_use]
pub fn rule_source(vm: &Value) -> RuleSource {
    let metadata = &vm["metadata"];
    let annotation = |key: &str| metadata["annotations"][key].as_str();
    if metadata["annotations"].get(SKIP).is_some() {
        return RuleSource::Nothing;
    }
    if let Some(own) = annotation(VM_RULES).filter(|r| !r.is_empty()) {
        return RuleSource::Own(own.to_owned());
    }
    let reference = |set: &Value| {
        let text = |key: &str| set[key].as_str().filter(|v| !v.is_empty());
        let namespace = text(TEMPLATE_NAMESPACE).or_else(|| text(OLD_TEMPLATE_NAMESPACE))?;
        Some(RuleSource::Template {
            namespace: namespace.to_owned(),
            name: text(TEMPLATE_NAME)?.to_owned(),
        })
    };
    reference(&metadata["labels"])
        .or_else(|| reference(&metadata["annotations"]))
        .unwrap_or(RuleSource::Nothing)
}

/// The VM as its rules see it: a `cpu` that is there has its `sockets`, `cores` and `threads`
/// of 0 (or unset) read as 1 (upstream's defaulting before evaluation).
#[must_use]
pub fn as_evaluated(vm: &Value) -> Value {
    let mut vm = vm.clone();
    if let Some(cpu) = vm
        .pointer_mut("/spec/template/spec/domain/cpu")
        .and_then(Value::as_object_mut)
    {
        for topology in ["sockets", "cores", "threads"] {
            let unset = cpu.get(topology).is_none_or(|v| v.as_u64() == Some(0));
            if unset {
                cpu.insert(topology.to_owned(), Value::from(1));
            }
        }
    }
    vm
}

//! Fields a VM sets that its instance type sets too.

use std::fmt;

use crate::validation::{Cause, CauseType};

/// One field the VM and the instance type both set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The VM's field path, e.g. `spec.template.spec.domain.cpu.sockets`.
    pub field: String,
}

impl Conflict {
    /// A conflict at `field` with upstream's message.
    #[must_use]
    pub fn at(field: impl Into<String>) -> Self {
        Self { field: field.into() }
    }

    /// The admission cause: `VM field(s) <path> conflicts with selected instance type`.
    #[must_use]
    pub fn cause(&self) -> Cause {
        Cause {
            kind: CauseType::Invalid,
            field: self.field.clone(),
            message: format!("VM field(s) {} conflicts with selected instance type", self.field),
        }
    }
}

/// Every conflict found; upstream reports them all together.
#[derive(Clone, Debug, Default, PartialEq, Eq, thiserror::Error)]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// The fields, joined with `, `.
    #[must_use]
    pub fn fields(&self) -> String {
        self.0.iter().map(|c| c.field.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// One admission cause per conflict.
    #[must_use]
    pub fn causes(&self) -> Vec<Cause> {
        self.0.iter().map(Conflict::cause).collect()
    }

    pub(crate) fn push(&mut self, field: String) {
        self.0.push(Conflict::at(field));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VM field(s) {} conflicts with selected instance type", self.fields())
    }
}

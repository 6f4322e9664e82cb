//! One line for an error and its causes, each said once: operator-kit's, which every component
//! uses (the operators' shared controller logs with it too).

pub use operator_kit::error_report::one_line;

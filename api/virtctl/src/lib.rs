//! virtctl.

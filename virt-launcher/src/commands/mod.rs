//! The `virt-launcher` commands, one per file: `render`, `run` (local mode) and `cluster` (no
//! subcommand: the launcher in its pod). `main.rs` only parses flags and calls these.

pub mod cluster;
pub mod process;
pub mod render;
pub mod run;

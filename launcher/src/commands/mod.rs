//! The `virt-launcher` subcommands, one per file. `main.rs` only parses flags and calls these.

pub mod process;
pub mod render;
pub mod run;

//! CDI's importer, as upstream's `cdi-importer`: it reads a disk image from its source, takes off
//! its compression, writes it raw into the claim (converting formats that need it with
//! `qemu-img`), and grows it to the size asked for.
//!
//! So far it holds the pure decisions: what a stream's first bytes say it is ([`format`]) and how
//! much of a volume the disk may take ([`space`]). The data path and the binary come next
//! (issue #33).

pub mod format;
pub mod space;

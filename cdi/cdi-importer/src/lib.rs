//! CDI's importer, as upstream's `cdi-importer`: it reads a disk image from its source, takes off
//! its compression, writes it raw into the claim (converting formats that need it with
//! `qemu-img`), and grows it to the size asked for.
//!
//! - [`format`]: what a stream's first bytes say it is; [`layers`]: taking compression off.
//! - [`sparse_copy`]: writing raw bytes with holes for zeros; [`qcow2_stream`]: a qcow2 image
//!   written as it streams; [`convert`]: `qemu-img`.
//! - [`space`]: how much of a volume the disk may take; [`import`]: one import, start to end;
//!   [`run`]: a job in the importer pod, with its termination message.
//! - [`job`]: the pod's environment, read; [`http_source`]: the `http` source; [`checksum`]: the DataVolume's `checksum`.
//!
//! - [`registry`]: the `registry` source; [`progress`]: the progress metric; [`body_pipe`]: an
//!   HTTP body (a download, an upload) as the pipeline's blocking reader.
//!
//! cdi-uploadserver reuses [`import`] and [`run::complete`] for what a client uploads.
//!
//! Not yet (issue #33): the S3, GCS, ImageIO and VDDK sources, and `archive` content.

pub mod body_pipe;
pub mod checksum;
pub mod convert;
pub mod format;
pub mod http_source;
pub mod import;
pub mod job;
pub mod layers;
pub mod pod_process;
pub mod progress;
pub mod qcow2_stream;
pub mod registry;
pub mod run;
pub mod space;
pub mod sparse_copy;
pub mod writeback;

//! `libvirtd-pages.so`: loaded into the launcher's libvirtd (`LD_PRELOAD`) so that libvirtd, too,
//! lets go of its start-up pages once the domain runs.
//!
//! Starting a domain touches much of libvirt.so, its QEMU driver and their libraries (the XML,
//! TLS and crypto code, the capabilities parser, the command-line builder); supervising it uses
//! little of that. The launcher drops its own such pages ([`resident_pages`]), but no process may
//! drop another's, so libvirtd does it itself, through this library, when the launcher asks.
//!
//! How: the launcher starts libvirtd with `LD_PRELOAD` naming this library and
//! `KUBEVIRT_RS_PAGE_RELEASE_FD` naming the read end of a pipe. The library's constructor takes
//! both variables out of the environment (so nothing libvirtd starts inherits them) and starts
//! one thread, with every signal blocked from its start, that reads the pipe: each byte asks for one drop, and
//! the end of the pipe (the launcher is gone) ends the thread. Each outcome is one line on
//! libvirtd's standard error, which the launcher keeps in libvirtd's log. Without the variable the
//! library does nothing at all.
//!
//! This file is compiled by `build.rs` with `rustc` alone, so it uses `std` and the C library
//! only; the drop itself is the launcher's own code, included from
//! `src/resident_pages/loaded_objects.rs`.

#![allow(unsafe_code)]

use std::ffi::c_int;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;

#[allow(dead_code)]
#[path = "../src/resident_pages/loaded_objects.rs"]
mod resident_pages;

mod protocol;

use protocol::{PREFIX, RELEASED, REQUEST_FD};

/// Run by the dynamic loader when libvirtd loads this library, before libvirtd's `main`.
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = on_load;

extern "C" fn on_load() {
    // Nothing may unwind into the loader.
    let _ = std::panic::catch_unwind(start);
}

fn start() {
    let Some(fd) = std::env::var(REQUEST_FD).ok().and_then(|v| v.parse::<c_int>().ok()) else {
        return;
    };
    // SAFETY: constructors run before `main`, while the process has one thread, so nothing reads
    // the environment concurrently.
    unsafe {
        std::env::remove_var(REQUEST_FD);
        std::env::remove_var("LD_PRELOAD");
    }
    if fd < 0 {
        return;
    }
    // SAFETY: the launcher passed this descriptor for this library alone; nothing else in
    // libvirtd knows it, so the `File` is its only owner.
    let requests = unsafe { std::fs::File::from_raw_fd(fd) };
    set_close_on_exec(fd);
    // The thread starts with every signal blocked, from its first instruction on: libvirtd's
    // handlers expect to run on libvirtd's own threads.
    let previous = block_signals();
    let spawned = std::thread::Builder::new()
        .name("page-release".to_owned())
        .stack_size(64 * 1024)
        .spawn(move || serve(requests));
    restore_signals(&previous);
    if let Err(e) = spawned {
        report(&format!("cannot start its thread: {e}"));
    }
}

/// Drops libvirtd's clean start-up pages once per byte read, until the launcher closes the pipe.
fn serve(mut requests: std::fs::File) {
    let mut byte = [0u8; 1];
    loop {
        match requests.read(&mut byte) {
            Ok(0) => return,
            Ok(_) => match resident_pages::drop_clean_file_pages() {
                Ok(dropped) => report(&format!(
                    "{RELEASED} {} ranges, {} KiB mapped",
                    dropped.ranges,
                    dropped.bytes / 1024
                )),
                Err(e) => report(&format!(
                    "cannot release some start-up pages: {e}: {}",
                    std::error::Error::source(&e)
                        .map(ToString::to_string)
                        .unwrap_or_default()
                )),
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                report(&format!("cannot read the launcher's requests: {e}"));
                return;
            }
        }
    }
}

/// One line on libvirtd's standard error (its log), in one write so that no other output of
/// libvirtd's lands inside it.
fn report(message: &str) {
    let line = format!("{PREFIX}{message}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The C library's declarations used here (glibc, Linux x86-64 and aarch64).
mod c {
    use std::ffi::c_int;

    /// `sigset_t`: 1024 bits.
    #[repr(C)]
    pub struct SignalSet(pub [u64; 16]);

    /// `SIG_BLOCK`.
    pub const SIG_BLOCK: c_int = 0;
    /// `SIG_SETMASK`.
    pub const SIG_SETMASK: c_int = 2;
    /// `F_SETFD`.
    pub const F_SETFD: c_int = 2;
    /// `FD_CLOEXEC`.
    pub const FD_CLOEXEC: c_int = 1;

    unsafe extern "C" {
        pub fn sigfillset(set: *mut SignalSet) -> c_int;
        pub fn pthread_sigmask(how: c_int, set: *const SignalSet, old: *mut SignalSet) -> c_int;
        pub fn fcntl(fd: c_int, command: c_int, ...) -> c_int;
    }
}

/// Blocks every signal on the calling thread, and returns the mask it had.
fn block_signals() -> c::SignalSet {
    let mut all = c::SignalSet([0; 16]);
    let mut previous = c::SignalSet([0; 16]);
    // SAFETY: both are valid, writable sigset_t-sized buffers; the calls only change this
    // thread's mask.
    unsafe {
        c::sigfillset(&raw mut all);
        c::pthread_sigmask(c::SIG_BLOCK, &raw const all, &raw mut previous);
    }
    previous
}

/// Gives the calling thread back the mask [`block_signals`] returned.
fn restore_signals(previous: &c::SignalSet) {
    // SAFETY: `previous` is a valid sigset_t-sized buffer; the call only changes this thread's
    // mask.
    unsafe {
        c::pthread_sigmask(c::SIG_SETMASK, previous, std::ptr::null_mut());
    }
}

/// Keeps the request pipe out of whatever libvirtd executes.
fn set_close_on_exec(fd: c_int) {
    // SAFETY: F_SETFD on a descriptor this library owns.
    unsafe {
        c::fcntl(fd, c::F_SETFD, c::FD_CLOEXEC);
    }
}

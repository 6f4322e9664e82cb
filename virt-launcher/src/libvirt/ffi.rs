//! The few libvirt calls the `virt` crate does not wrap (docs/dependencies.md, "What virt does not
//! wrap"): lifecycle event registration, the raw domain state, the guest's SSH authorized keys, and a
//! migration's job statistics, abort and switch to post-copy.
//! It is the launcher's libvirt FFI; the other `unsafe` code of the workspace is small and local
//! (a child's set-up between fork and exec, mappings of our own memory, process-wide settings),
//! each with its `SAFETY:` comment.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_void};

use tokio::sync::mpsc::UnboundedSender;
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::Error;
use virt::sys;

/// A lifecycle event: libvirt's `virDomainEventType` and its detail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifecycleEvent {
    /// `VIR_DOMAIN_EVENT_*` (0 defined, 2 started, 3 suspended, 4 resumed, 5 stopped, 6 shutdown, ...).
    pub event: i32,
    /// The event's detail code.
    pub detail: i32,
}

type Sender = UnboundedSender<LifecycleEvent>;
type LifecycleCallback =
    unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, c_int, c_int, *mut c_void) -> c_int;
type GenericCallback = unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, *mut c_void);

/// Runs on libvirt's event-loop thread: it only forwards, never blocks.
unsafe extern "C" fn on_lifecycle(
    _conn: sys::virConnectPtr,
    _dom: sys::virDomainPtr,
    event: c_int,
    detail: c_int,
    opaque: *mut c_void,
) -> c_int {
    // SAFETY: `opaque` is the boxed sender passed to `register_lifecycle`; libvirt keeps it alive
    // until it calls `free_sender`, which happens only after the last callback.
    let sender = unsafe { &*opaque.cast::<Sender>() };
    let _ = sender.send(LifecycleEvent { event, detail });
    0
}

unsafe extern "C" fn free_sender(opaque: *mut c_void) {
    // SAFETY: `opaque` came from `Box::into_raw` in `register_lifecycle` and libvirt frees it once.
    drop(unsafe { Box::from_raw(opaque.cast::<Sender>()) });
}

/// Registers for lifecycle events of every domain on `conn`; returns the callback id.
pub fn register_lifecycle(conn: &Connect, sender: Sender) -> Result<c_int, Error> {
    let opaque = Box::into_raw(Box::new(sender)).cast::<c_void>();
    let lifecycle: LifecycleCallback = on_lifecycle;
    // SAFETY: libvirt calls a VIR_DOMAIN_EVENT_ID_LIFECYCLE callback with the lifecycle signature;
    // the generic type is only how the C API passes it (the C macro VIR_DOMAIN_EVENT_CALLBACK casts
    // the same way). Both are `extern "C"` function pointers of the same size.
    let generic = unsafe { std::mem::transmute::<LifecycleCallback, GenericCallback>(lifecycle) };
    // SAFETY: `conn.as_ptr()` is a live connection; the callback and free function match libvirt's
    // contract; `opaque` stays valid until libvirt calls `free_sender`.
    let id = unsafe {
        sys::virConnectDomainEventRegisterAny(
            conn.as_ptr(),
            std::ptr::null_mut(),
            c_int::try_from(sys::VIR_DOMAIN_EVENT_ID_LIFECYCLE).unwrap_or_default(),
            Some(generic),
            opaque,
            Some(free_sender),
        )
    };
    if id < 0 {
        // SAFETY: registration failed, so libvirt will never call `free_sender`; we still own it.
        drop(unsafe { Box::from_raw(opaque.cast::<Sender>()) });
        return Err(Error::last_error());
    }
    Ok(id)
}

/// Removes a registration made by [`register_lifecycle`]. Errors are ignored: on a dead connection
/// there is nothing left to remove.
pub fn deregister(conn: &Connect, callback_id: c_int) {
    // SAFETY: `conn` is a connection handle (possibly broken, which libvirt reports as an error).
    let _ = unsafe { sys::virConnectDomainEventDeregisterAny(conn.as_ptr(), callback_id) };
}

/// `virDomainGetState`: the raw state and reason codes.
pub fn domain_state(domain: &Domain) -> Result<(u32, u32), Error> {
    let (mut state, mut reason): (c_int, c_int) = (-1, -1);
    // SAFETY: `domain.as_ptr()` is a live domain handle and both out-pointers are valid.
    let rc = unsafe { sys::virDomainGetState(domain.as_ptr(), &raw mut state, &raw mut reason, 0) };
    if rc < 0 {
        return Err(Error::last_error());
    }
    Ok((u32::try_from(state).unwrap_or(0), u32::try_from(reason).unwrap_or(0)))
}

/// `virDomainAuthorizedSSHKeysSet` with no flags: replaces `user`'s authorized keys in the guest
/// (through the guest agent) with `keys`.
pub fn set_authorized_ssh_keys(domain: &Domain, user: &str, keys: &[String]) -> Result<(), Error> {
    let user = std::ffi::CString::new(user)?;
    let keys: Vec<std::ffi::CString> = keys
        .iter()
        .map(|k| std::ffi::CString::new(k.as_str()))
        .collect::<Result<_, _>>()?;
    let mut pointers: Vec<*const std::os::raw::c_char> = keys.iter().map(|k| k.as_ptr()).collect();
    let count = std::os::raw::c_uint::try_from(pointers.len()).unwrap_or(std::os::raw::c_uint::MAX);
    // SAFETY: the domain handle is live; `user` and every key are NUL-terminated strings that
    // outlive the call, and `pointers` holds `count` valid pointers to them.
    let rc =
        unsafe { sys::virDomainAuthorizedSSHKeysSet(domain.as_ptr(), user.as_ptr(), pointers.as_mut_ptr(), count, 0) };
    if rc < 0 {
        return Err(Error::last_error());
    }
    Ok(())
}

/// A running job's statistics (`virDomainGetJobStats`), the counters a migration reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounters {
    /// Bytes moved.
    pub data_processed: u64,
    /// Bytes left.
    pub data_remaining: u64,
    /// Bytes in all.
    pub data_total: u64,
    /// Pages dirtied per second.
    pub memory_dirty_rate: u64,
    /// Passes over memory.
    pub memory_iteration: u64,
}

/// `virDomainGetJobStats` of the domain's active job; `None` when no job runs.
pub fn job_counters(domain: &Domain) -> Result<Option<JobCounters>, Error> {
    let mut kind: c_int = 0;
    let mut params: sys::virTypedParameterPtr = std::ptr::null_mut();
    let mut count: c_int = 0;
    // SAFETY: the domain handle is live; libvirt allocates `params` (or leaves it null) and sets
    // `count`; they are freed below with virTypedParamsFree, libvirt's own free.
    let rc = unsafe { sys::virDomainGetJobStats(domain.as_ptr(), &raw mut kind, &raw mut params, &raw mut count, 0) };
    if rc < 0 {
        return Err(Error::last_error());
    }
    let read = |name: &std::ffi::CStr| {
        let mut value: std::os::raw::c_ulonglong = 0;
        if params.is_null() {
            return 0;
        }
        // SAFETY: `params` holds `count` parameters libvirt returned; `name` is NUL-terminated;
        // the call only reads them and writes `value`.
        let found = unsafe { sys::virTypedParamsGetULLong(params, count, name.as_ptr(), &raw mut value) };
        if found == 1 { value } else { 0 }
    };
    let counters = JobCounters {
        data_processed: read(sys::VIR_DOMAIN_JOB_DATA_PROCESSED),
        data_remaining: read(sys::VIR_DOMAIN_JOB_DATA_REMAINING),
        data_total: read(sys::VIR_DOMAIN_JOB_DATA_TOTAL),
        memory_dirty_rate: read(sys::VIR_DOMAIN_JOB_MEMORY_DIRTY_RATE),
        memory_iteration: read(sys::VIR_DOMAIN_JOB_MEMORY_ITERATION),
    };
    if !params.is_null() {
        // SAFETY: `params` and `count` are what virDomainGetJobStats returned, freed once.
        unsafe { sys::virTypedParamsFree(params, count) };
    }
    Ok((u32::try_from(kind).unwrap_or(0) != sys::VIR_DOMAIN_JOB_NONE).then_some(counters))
}

/// `virDomainAbortJob`: aborts the domain's running job (a migration).
pub fn abort_job(domain: &Domain) -> Result<(), Error> {
    // SAFETY: the domain handle is live.
    if unsafe { sys::virDomainAbortJob(domain.as_ptr()) } < 0 {
        return Err(Error::last_error());
    }
    Ok(())
}

/// `virDomainMigrateStartPostCopy`: switches a running migration (started with
/// `VIR_MIGRATE_POSTCOPY`) to post-copy.
pub fn start_post_copy(domain: &Domain) -> Result<(), Error> {
    // SAFETY: the domain handle is live.
    if unsafe { sys::virDomainMigrateStartPostCopy(domain.as_ptr(), 0) } < 0 {
        return Err(Error::last_error());
    }
    Ok(())
}

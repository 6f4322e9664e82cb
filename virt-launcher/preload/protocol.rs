//! What the launcher and `libvirtd-pages.so` agree on; included by both
//! (`src/supervisor/page_release.rs` and `preload/libvirtd_pages.rs`).

/// The variable that names the request pipe's read end in libvirtd's environment.
pub const REQUEST_FD: &str = "KUBEVIRT_RS_PAGE_RELEASE_FD";

/// How each line the library writes on libvirtd's standard error starts.
pub const PREFIX: &str = "libvirtd-pages: ";

/// How a success report goes on after [`PREFIX`]: the launcher logs those lines as information,
/// and every other line of libvirtd's as a warning.
pub const RELEASED: &str = "start-up pages released:";

//! Which of upstream's upload server routes a request is for. Pure.

use cdi_api::upload;

/// How the client waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Answered once the disk is written.
    Sync,
    /// Answered once the body is in; the disk is finished after.
    Async,
}

/// How the disk comes in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// The body is the image.
    Raw,
    /// The body is a multipart form whose `file` part is the image.
    Form,
}

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`: `OK`.
    Healthz,
    /// A `POST` of an image.
    Upload(Mode, Body),
    /// A `HEAD` of an async path: clients ask it whether async uploads are served (200).
    AsyncProbe,
    /// An `archive` upload, which this server does not take.
    Archive,
    /// Another method on an upload path, or another path (upstream answers both with 404).
    NotFound,
}

/// The route of `method` on `path`.
#[must_use]
pub fn route(method: &str, path: &str) -> Route {
    let is = |paths: &[&str]| paths.contains(&path);
    let (mode, body) = if path == upload::HEALTHZ_PATH {
        return Route::Healthz;
    } else if is(&upload::SYNC_PATHS) {
        (Mode::Sync, Body::Raw)
    } else if is(&upload::ASYNC_PATHS) {
        (Mode::Async, Body::Raw)
    } else if is(&upload::SYNC_FORM_PATHS) {
        (Mode::Sync, Body::Form)
    } else if is(&upload::ASYNC_FORM_PATHS) {
        (Mode::Async, Body::Form)
    } else if is(&upload::ARCHIVE_PATHS) {
        return if method == "POST" {
            Route::Archive
        } else {
            Route::NotFound
        };
    } else {
        return Route::NotFound;
    };
    match method {
        "POST" => Route::Upload(mode, body),
        "HEAD" if mode == Mode::Async => Route::AsyncProbe,
        _ => Route::NotFound,
    }
}

/// The boundary of a `multipart/form-data` content type.
#[must_use]
pub fn form_boundary(content_type: &str) -> Option<String> {
    let mut parts = content_type.split(';');
    let essence = parts.next()?.trim();
    if !essence.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    parts.find_map(|part| {
        let (key, value) = part.split_once('=')?;
        let value = value.trim().trim_matches('"');
        (key.trim().eq_ignore_ascii_case("boundary") && !value.is_empty()).then(|| value.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn each_of_upstreams_paths_and_methods() {
        let cases = [
            ("GET", "/healthz", Route::Healthz),
            ("POST", "/healthz", Route::Healthz),
            ("POST", "/v1beta1/upload", Route::Upload(Mode::Sync, Body::Raw)),
            ("POST", "/v1alpha1/upload", Route::Upload(Mode::Sync, Body::Raw)),
            ("PUT", "/v1beta1/upload", Route::NotFound),
            ("HEAD", "/v1beta1/upload", Route::NotFound),
            ("POST", "/v1beta1/upload-async", Route::Upload(Mode::Async, Body::Raw)),
            ("HEAD", "/v1beta1/upload-async", Route::AsyncProbe),
            ("HEAD", "/v1alpha1/upload-async", Route::AsyncProbe),
            ("GET", "/v1beta1/upload-async", Route::NotFound),
            ("POST", "/v1beta1/upload-form", Route::Upload(Mode::Sync, Body::Form)),
            (
                "POST",
                "/v1beta1/upload-form-async",
                Route::Upload(Mode::Async, Body::Form),
            ),
            ("HEAD", "/v1beta1/upload-form-async", Route::AsyncProbe),
            ("POST", "/v1beta1/upload-archive", Route::Archive),
            ("GET", "/v1beta1/upload-archive", Route::NotFound),
            ("POST", "/v1beta1/uploads", Route::NotFound),
            ("POST", "/", Route::NotFound),
        ];
        for (method, path, want) in cases {
            assert_eq!(route(method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn a_forms_boundary_is_read_quoted_or_not() {
        assert_eq!(
            form_boundary("multipart/form-data; boundary=abc123").as_deref(),
            Some("abc123")
        );
        assert_eq!(
            form_boundary("Multipart/Form-Data; charset=utf-8; Boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(form_boundary("multipart/form-data"), None);
        assert_eq!(form_boundary("multipart/form-data; boundary="), None);
        assert_eq!(form_boundary("application/octet-stream; boundary=x"), None);
    }
}

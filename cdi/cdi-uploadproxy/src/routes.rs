//! Which requests the proxy answers (upstream's `ProxyPaths` and `/healthz`), where on the upload
//! server an upload goes (by the claim's content type), and the CORS answers upstream's
//! `cors.AllowAll()` gives browsers. Pure.

use cdi_api::upload;

/// What a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`.
    Healthz,
    /// An upload path (any method: the upload server answers it).
    Upload,
    /// Anything else.
    NotFound,
}

/// The route of `path`.
#[must_use]
pub fn route(path: &str) -> Route {
    let uploads = upload::SYNC_PATHS
        .iter()
        .chain(&upload::ASYNC_PATHS)
        .chain(&upload::SYNC_FORM_PATHS)
        .chain(&upload::ASYNC_FORM_PATHS);
    if path == upload::HEALTHZ_PATH {
        Route::Healthz
    } else if uploads.into_iter().any(|p| *p == path) {
        Route::Upload
    } else {
        Route::NotFound
    }
}

/// The upload server's path for a request on `path` into a claim of `content_type` (upstream's
/// `resolveUploadPath`).
///
/// # Errors
/// Upstream's message for a content type that is neither `kubevirt` nor `archive`.
pub fn upstream_path(path: &str, claim: &str, content_type: &str) -> Result<String, String> {
    match content_type {
        "" | "kubevirt" => Ok(path.to_owned()),
        "archive" if path.contains("alpha") => Ok(upload::ARCHIVE_PATHS[1].to_owned()),
        "archive" => Ok(upload::ARCHIVE_PATHS[0].to_owned()),
        other => Err(format!(
            "rejecting upload request for PVC {claim} - upload content-type {other} is invalid"
        )),
    }
}

/// The headers of a CORS preflight answer (`OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`), as `cors.AllowAll()` gives them; `None` when the request is
/// no preflight.
#[must_use]
pub fn preflight(
    method: &str,
    origin: Option<&str>,
    request_method: Option<&str>,
    request_headers: Option<&str>,
) -> Option<Vec<(&'static str, String)>> {
    if method != "OPTIONS" || origin.is_none() {
        return None;
    }
    let request_method = request_method?;
    let mut headers = vec![
        (
            "Vary",
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers".to_owned(),
        ),
        ("Access-Control-Allow-Origin", "*".to_owned()),
        ("Access-Control-Allow-Methods", request_method.to_ascii_uppercase()),
    ];
    if let Some(requested) = request_headers.filter(|h| !h.trim().is_empty()) {
        headers.push(("Access-Control-Allow-Headers", requested.to_owned()));
    }
    Some(headers)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn upstreams_proxy_paths_and_health_only() {
        for path in [
            "/v1beta1/upload",
            "/v1alpha1/upload",
            "/v1beta1/upload-async",
            "/v1alpha1/upload-async",
            "/v1beta1/upload-form",
            "/v1beta1/upload-form-async",
        ] {
            assert_eq!(route(path), Route::Upload, "{path}");
        }
        assert_eq!(route("/healthz"), Route::Healthz);
        for path in ["/", "/v1beta1/upload-archive", "/v1beta1/uploads", "/metrics"] {
            assert_eq!(route(path), Route::NotFound, "{path}");
        }
    }

    #[test]
    fn the_claims_content_type_picks_the_upload_servers_path() {
        assert_eq!(
            upstream_path("/v1beta1/upload-async", "disk", "kubevirt").as_deref(),
            Ok("/v1beta1/upload-async")
        );
        assert_eq!(
            upstream_path("/v1beta1/upload", "disk", "").as_deref(),
            Ok("/v1beta1/upload")
        );
        assert_eq!(
            upstream_path("/v1beta1/upload", "disk", "archive").as_deref(),
            Ok("/v1beta1/upload-archive")
        );
        assert_eq!(
            upstream_path("/v1alpha1/upload", "disk", "archive").as_deref(),
            Ok("/v1alpha1/upload-archive")
        );
        assert_eq!(
            upstream_path("/v1beta1/upload", "disk", "other"),
            Err("rejecting upload request for PVC disk - upload content-type other is invalid".to_owned())
        );
    }

    #[test]
    fn a_browsers_preflight_is_allowed_and_anything_else_is_no_preflight() {
        assert_eq!(
            preflight(
                "OPTIONS",
                Some("https://console"),
                Some("post"),
                Some("authorization, content-type")
            ),
            Some(vec![
                (
                    "Vary",
                    "Origin, Access-Control-Request-Method, Access-Control-Request-Headers".to_owned()
                ),
                ("Access-Control-Allow-Origin", "*".to_owned()),
                ("Access-Control-Allow-Methods", "POST".to_owned()),
                ("Access-Control-Allow-Headers", "authorization, content-type".to_owned()),
            ])
        );
        assert_eq!(preflight("OPTIONS", None, Some("POST"), None), None);
        assert_eq!(preflight("OPTIONS", Some("o"), None, None), None);
        assert_eq!(preflight("POST", Some("o"), Some("POST"), None), None);
    }
}

//! An image reference as the registry source's URL gives it (`docker://[host[:port]/]path[:tag][@digest]`),
//! read with the rules of the docker CLI that upstream's importer follows: a first component with a
//! dot or a port, or `localhost`, is the registry's host; otherwise the image is on Docker Hub,
//! whose one-component names live under `library/`. The tag defaults to `latest`. Pure.

/// Docker Hub's name in references.
pub const DOCKER_HUB: &str = "docker.io";
/// The host that serves Docker Hub's registry API.
pub const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// A parsed reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The registry's host and port, as the API is reached.
    pub registry: String,
    /// The repository's path.
    pub repository: String,
    /// A tag or a digest (`sha256:…`): what the manifest is fetched by.
    pub reference: String,
}

/// Why a URL is not a reference.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// No `transport:` prefix.
    #[error("Invalid image name {0:?}, expected colon-separated transport:reference")]
    NoTransport(String),
    /// A transport other than `docker`.
    #[error("Invalid image name {0:?}, unknown transport")]
    UnknownTransport(String),
    /// The `oci-archive` transport, which reads a file on the importer's node.
    #[error("Invalid image name {0:?}: the oci-archive transport is not supported by this importer")]
    OciArchive(String),
    /// The reference itself is malformed.
    #[error("Could not parse image {url:?}: {reason}")]
    Malformed {
        /// The URL.
        url: String,
        /// Why.
        reason: &'static str,
    },
}

fn is_path_component(component: &str) -> bool {
    // Lower-case letters and digits, separated by `.`, `_`, `__` or dashes (the distribution spec's).
    !component.is_empty()
        && component
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
        && component.starts_with(|c: char| c.is_ascii_alphanumeric())
        && component.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn is_digest(digest: &str) -> bool {
    digest.split_once(':').is_some_and(|(algorithm, hex)| {
        !algorithm.is_empty()
            && algorithm
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b))
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// Parses the registry source's `url`.
///
/// # Errors
/// [`ReferenceError`], in upstream's words where it has them.
pub fn parse(url: &str) -> Result<Reference, ReferenceError> {
    let malformed = |reason| ReferenceError::Malformed {
        url: url.to_owned(),
        reason,
    };
    let Some((transport, rest)) = url.split_once(':') else {
        return Err(ReferenceError::NoTransport(url.to_owned()));
    };
    match transport {
        "docker" => {}
        "oci-archive" => return Err(ReferenceError::OciArchive(url.to_owned())),
        _ => return Err(ReferenceError::UnknownTransport(url.to_owned())),
    }
    let rest = rest
        .strip_prefix("//")
        .ok_or_else(|| malformed("a docker reference starts with docker://"))?;
    let (name, digest) = match rest.split_once('@') {
        Some((name, digest)) => {
            if !is_digest(digest) {
                return Err(malformed("the digest is not algorithm:hex"));
            }
            (name, Some(digest))
        }
        None => (rest, None),
    };
    // A tag follows the last colon after the last slash (a colon before it is the host's port).
    let (name, tag) = match name.rsplit_once(':') {
        Some((before, tag)) if !tag.contains('/') => (before, Some(tag)),
        _ => (name, None),
    };
    if let Some(tag) = tag
        && !is_tag(tag)
    {
        return Err(malformed("the tag has characters a tag may not have"));
    }
    let (registry, repository) = match name.split_once('/') {
        Some((first, path)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_owned(), path.to_owned())
        }
        _ => (DOCKER_HUB.to_owned(), name.to_owned()),
    };
    if registry.is_empty() || repository.is_empty() {
        return Err(malformed("no repository"));
    }
    if !repository.split('/').all(is_path_component) {
        return Err(malformed(
            "the repository must be lower-case letters, digits and separators",
        ));
    }
    let (registry, repository) = if registry == DOCKER_HUB {
        let repository = if repository.contains('/') {
            repository
        } else {
            format!("library/{repository}")
        };
        (DOCKER_HUB_API.to_owned(), repository)
    } else {
        (registry, repository)
    };
    let reference = digest.or(tag).unwrap_or("latest").to_owned();
    Ok(Reference {
        registry,
        repository,
        reference,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn reference(registry: &str, repository: &str, reference: &str) -> Reference {
        Reference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            reference: reference.to_owned(),
        }
    }

    #[test]
    fn hosts_ports_tags_and_digests_are_told_apart() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let cases = [
            (
                "docker://quay.io/containerdisks/fedora:41",
                reference("quay.io", "containerdisks/fedora", "41"),
            ),
            (
                "docker://quay.io/containerdisks/fedora",
                reference("quay.io", "containerdisks/fedora", "latest"),
            ),
            (
                "docker://registry.cdi.svc:5000/disks/testguest:v1",
                reference("registry.cdi.svc:5000", "disks/testguest", "v1"),
            ),
            ("docker://localhost/disk", reference("localhost", "disk", "latest")),
            (
                "docker://10.0.0.1:5000/disk",
                reference("10.0.0.1:5000", "disk", "latest"),
            ),
            (
                "docker://busybox",
                reference(DOCKER_HUB_API, "library/busybox", "latest"),
            ),
            (
                "docker://kubevirt/cirros:v1",
                reference(DOCKER_HUB_API, "kubevirt/cirros", "v1"),
            ),
            (
                "docker://docker.io/busybox:1",
                reference(DOCKER_HUB_API, "library/busybox", "1"),
            ),
            (
                &format!("docker://quay.io/a/b:tag@{digest}"),
                reference("quay.io", "a/b", &digest),
            ),
        ];
        for (url, want) in cases {
            assert_eq!(parse(url), Ok(want), "{url}");
        }
    }

    #[test]
    fn bad_urls_are_named() {
        let cases = [
            ("quay.io/a", "expected colon-separated transport:reference"),
            ("http://quay.io/a", "unknown transport"),
            ("oci-archive:/tmp/a.tar", "oci-archive transport is not supported"),
            ("docker:quay.io/a", "starts with docker://"),
            ("docker://quay.io/A", "lower-case"),
            ("docker://quay.io/a@sha256:xyz", "algorithm:hex"),
            ("docker://quay.io/a:b@c", "algorithm:hex"),
            ("docker://quay.io/a:-x", "tag"),
            ("docker://quay.io/", "no repository"),
            ("docker://", "no repository"),
        ];
        for (url, want) in cases {
            let error = parse(url).expect_err(url).to_string();
            assert!(error.contains(want), "{url}: {error}");
            assert!(error.contains(url), "{url}: {error}");
        }
    }
}

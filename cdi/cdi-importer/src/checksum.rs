//! A DataVolume's `checksum` (`algorithm:hash`, with md5, sha1, sha256 or sha512), checked against
//! the bytes downloaded, as upstream's importer does: parsed (with upstream's messages) before the
//! download starts, computed as the source is read, compared when it has been read whole.

use std::fmt::Write as _;
use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use digest::DynDigest;

/// Why a checksum is refused or did not match.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumError {
    /// Not `algorithm:hash`.
    #[error("invalid checksum format: expected 'algorithm:hash', got '{0}'")]
    Format(String),
    /// Nothing after the colon.
    #[error("checksum hash value cannot be empty")]
    EmptyHash,
    /// An algorithm we do not compute.
    #[error("unsupported hash algorithm '{0}': supported algorithms are: md5, sha1, sha256, sha512")]
    Algorithm(String),
    /// The hash has the wrong length for its algorithm.
    #[error("invalid {algorithm} hash length: expected {expected} hex characters, got {got}")]
    Length {
        /// The algorithm.
        algorithm: String,
        /// Its length in hex.
        expected: usize,
        /// The given one's.
        got: usize,
    },
    /// The hash is not hexadecimal.
    #[error("invalid {algorithm} hash: {hash:?} is not hexadecimal")]
    NotHex {
        /// The algorithm.
        algorithm: String,
        /// The hash.
        hash: String,
    },
    /// The download's checksum differs.
    #[error("checksum mismatch: expected {algorithm}:{expected}, calculated {algorithm}:{calculated}")]
    Mismatch {
        /// The algorithm.
        algorithm: String,
        /// The expected hash.
        expected: String,
        /// The download's.
        calculated: String,
    },
}

/// A parsed checksum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checksum {
    /// The algorithm, lower case.
    pub algorithm: String,
    /// The hash, lower-case hex.
    pub hash: String,
}

impl Checksum {
    /// Parses `algorithm:hash` (either case, spaces around each part allowed).
    ///
    /// # Errors
    /// [`ChecksumError`].
    pub fn parse(given: &str) -> Result<Self, ChecksumError> {
        let (algorithm, hash) = given
            .split_once(':')
            .filter(|(_, hash)| !hash.contains(':'))
            .ok_or_else(|| ChecksumError::Format(given.to_owned()))?;
        let algorithm = algorithm.trim().to_lowercase();
        let hash = hash.trim().to_lowercase();
        if hash.is_empty() {
            return Err(ChecksumError::EmptyHash);
        }
        let expected = match algorithm.as_str() {
            "md5" => 32,
            "sha1" => 40,
            "sha256" => 64,
            "sha512" => 128,
            _ => return Err(ChecksumError::Algorithm(algorithm)),
        };
        if hash.len() != expected {
            return Err(ChecksumError::Length {
                algorithm,
                expected,
                got: hash.len(),
            });
        }
        if !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ChecksumError::NotHex { algorithm, hash });
        }
        Ok(Self { algorithm, hash })
    }

    fn hasher(&self) -> Box<dyn DynDigest + Send> {
        match self.algorithm.as_str() {
            "md5" => Box::new(md5::Md5::default()),
            "sha1" => Box::new(sha1::Sha1::default()),
            "sha512" => Box::new(sha2::Sha512::default()),
            _ => Box::new(sha2::Sha256::default()),
        }
    }

    /// Wraps `source` so that what is read through it is hashed; the [`Verifier`] compares.
    pub fn watch<R: Read>(&self, source: R) -> (Hashing<R>, Verifier) {
        let hasher = Arc::new(Mutex::new(self.hasher()));
        (
            Hashing {
                source,
                hasher: Arc::clone(&hasher),
            },
            Verifier {
                expected: self.clone(),
                hasher,
            },
        )
    }
}

/// A source whose bytes are hashed as they are read.
pub struct Hashing<R> {
    source: R,
    hasher: Arc<Mutex<Box<dyn DynDigest + Send>>>,
}

impl<R> std::fmt::Debug for Hashing<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hashing").finish_non_exhaustive()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.source.read(buffer)?;
        self.hasher
            .lock()
            .map_err(|_| io::Error::other("the checksum's hasher was poisoned"))?
            .update(&buffer[..n]);
        Ok(n)
    }
}

/// Compares the hash of what was read with the expected one.
pub struct Verifier {
    expected: Checksum,
    hasher: Arc<Mutex<Box<dyn DynDigest + Send>>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Checks the bytes read so far (the whole source, once the import has read it).
    ///
    /// # Errors
    /// [`ChecksumError::Mismatch`].
    pub fn verify(&self) -> Result<(), ChecksumError> {
        let digest = self
            .hasher
            .lock()
            .map(|hasher| hasher.box_clone().finalize())
            .unwrap_or_default();
        let calculated = digest.iter().fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
        if calculated != self.expected.hash {
            return Err(ChecksumError::Mismatch {
                algorithm: self.expected.algorithm.clone(),
                expected: self.expected.hash.clone(),
                calculated,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA256_EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const SHA256_HELLO: &str = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";

    fn check(given: &str, data: &[u8]) -> Result<(), ChecksumError> {
        let checksum = Checksum::parse(given)?;
        let (mut reader, verifier) = checksum.watch(data);
        io::copy(&mut reader, &mut io::sink()).expect("read");
        verifier.verify()
    }

    #[test]
    fn each_algorithm_matches_its_known_digest() {
        let hello = b"hello world";
        for given in [
            format!("sha256:{SHA256_EMPTY}"),
            "md5:d41d8cd98f00b204e9800998ecf8427e".to_owned(),
            "sha1:da39a3ee5e6b4b0d3255bfef95601890afd80709".to_owned(),
            "sha512:cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e".to_owned(),
            format!("SHA256:{}", SHA256_EMPTY.to_uppercase()),
        ] {
            assert_eq!(check(&given, b""), Ok(()), "{given}");
        }
        assert_eq!(check(&format!("sha256:{SHA256_HELLO}"), hello), Ok(()));
        assert_eq!(check("md5:5eb63bbbe01eeed093cb22bb8f5acdc3", hello), Ok(()));
    }

    #[test]
    fn a_different_download_is_a_mismatch_naming_both_hashes() {
        let zeros = "0".repeat(64);
        let error = check(&format!("sha256:{zeros}"), b"hello world").expect_err("mismatch");
        assert_eq!(
            error.to_string(),
            format!("checksum mismatch: expected sha256:{zeros}, calculated sha256:{SHA256_HELLO}")
        );
    }

    #[test]
    fn malformed_checksums_are_refused_with_upstreams_messages() {
        let cases = [
            (
                "sha256abc123",
                "invalid checksum format: expected 'algorithm:hash', got 'sha256abc123'",
            ),
            (
                "sha256:abc:123",
                "invalid checksum format: expected 'algorithm:hash', got 'sha256:abc:123'",
            ),
            (
                "crc32:abc123",
                "unsupported hash algorithm 'crc32': supported algorithms are: md5, sha1, sha256, sha512",
            ),
            ("sha256:", "checksum hash value cannot be empty"),
            ("md5:abc", "invalid md5 hash length: expected 32 hex characters, got 3"),
        ];
        for (given, message) in cases {
            assert_eq!(Checksum::parse(given).expect_err(given).to_string(), message);
        }
        let not_hex = format!("sha1:{}", "g".repeat(40));
        assert!(matches!(Checksum::parse(&not_hex), Err(ChecksumError::NotHex { .. })));
    }
}

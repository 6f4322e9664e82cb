//! The names CDI's components find each other's certificates and keys by, in CDI's namespace
//! (upstream's, except the signing key's file names: upstream signs with RSA, CDI here with
//! Ed25519).

/// cdi-apiserver's Service.
pub const APISERVER_SERVICE: &str = "cdi-api";
/// The CA that signs cdi-apiserver's serving certificate (the APIService's `caBundle`).
pub const APISERVER_SIGNER_SECRET: &str = "cdi-apiserver-signer";
/// That CA's bundle.
pub const APISERVER_SIGNER_BUNDLE: &str = "cdi-apiserver-signer-bundle";
/// cdi-apiserver's serving certificate.
pub const APISERVER_CERT_SECRET: &str = "cdi-apiserver-server-cert";
/// The mutating webhook configuration of DataVolumes (upstream's), served by cdi-apiserver.
pub const DATA_VOLUME_MUTATOR: &str = "cdi-api-datavolume-mutate";
/// The APIService of the upload API.
pub const UPLOAD_API_SERVICE: &str = "v1beta1.upload.cdi.kubevirt.io";

/// cdi-uploadproxy's Service.
pub const UPLOADPROXY_SERVICE: &str = "cdi-uploadproxy";
/// The CA that signs cdi-uploadproxy's serving certificate.
pub const UPLOADPROXY_SIGNER_SECRET: &str = "cdi-uploadproxy-signer";
/// That CA's bundle, for clients of the proxy.
pub const UPLOADPROXY_SIGNER_BUNDLE: &str = "cdi-uploadproxy-signer-bundle";
/// cdi-uploadproxy's serving certificate.
pub const UPLOADPROXY_CERT_SECRET: &str = "cdi-uploadproxy-server-cert";

/// The Secret with the key cdi-apiserver signs upload tokens with.
pub const SIGNING_KEY_SECRET: &str = "cdi-api-signing-key";
/// Its private key (PKCS#8, Ed25519).
pub const SIGNING_KEY_PRIVATE: &str = "id_ed25519";
/// Its public key (raw Ed25519), which cdi-uploadproxy checks tokens with.
pub const SIGNING_KEY_PUBLIC: &str = "id_ed25519.pub";

//! [`ArchiveLocation`]: where an archive lives, an object store and a prefix in it.
//!
//! `ArchiveLocation::parse` takes a local directory (`/var/archive/2026-03`, `./a`), a
//! `file://` URL, or, in a build with the `cloud` feature, an object store URL: `s3://bucket/prefix`
//! (Amazon S3 and S3-compatible stores), `gs://bucket/prefix` (Google Cloud Storage),
//! `az://container/prefix` or `abfss://container@account.dfs.core.windows.net/prefix` (Azure),
//! with credentials and options from the environment as each cloud's tools read them
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`; docs/archive.md). A caller with another `ObjectStore` uses
//! [`ArchiveLocation::new`].

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path;

use crate::error::ArchiveError;

#[derive(Debug, Clone)]
pub struct ArchiveLocation {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: Path,
    display: String,
}

impl ArchiveLocation {
    /// An archive at `prefix` of `store`; `display` names it in messages.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, display: impl Into<String>) -> Self {
        ArchiveLocation { store, prefix, display: display.into() }
    }

    /// A local directory or `file://` URL. The directory is created when `create` is set (an
    /// export); otherwise it must exist.
    pub fn parse(location: &str, create: bool) -> Result<Self, ArchiveError> {
        let bad = |reason: String| ArchiveError::BadLocation { location: location.to_owned(), reason };
        if location.trim().is_empty() {
            return Err(bad("empty".into()));
        }
        let path = match location.split_once("://") {
            Some(("file", rest)) if rest.starts_with('/') => rest,
            Some(("file", _)) => {
                return Err(bad("a file:// URL needs an absolute path (file:///dir)".into()));
            }
            Some((scheme, _)) => return cloud::parse(location, scheme).map_err(bad),
            None => location,
        };
        let dir = std::path::Path::new(path);
        if create {
            std::fs::create_dir_all(dir).map_err(|e| bad(format!("cannot create the directory: {e}")))?;
        }
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(bad("not a directory".into())),
            Err(e) => return Err(bad(format!("not a readable directory: {e}"))),
        }
        let store = LocalFileSystem::new_with_prefix(dir).map_err(|e| bad(e.to_string()))?;
        Ok(ArchiveLocation::new(Arc::new(store), Path::default(), location))
    }

    /// The path of `name` under the prefix.
    pub(crate) fn child(&self, name: &str) -> Path {
        self.prefix.clone().join(name)
    }

    /// `name` relative to the prefix, for a listed object.
    pub(crate) fn relative(&self, path: &Path) -> String {
        path.prefix_match(&self.prefix)
            .map(|parts| parts.map(|p| p.as_ref().to_owned()).collect::<Vec<_>>().join("/"))
            .unwrap_or_else(|| path.to_string())
    }
}

impl std::fmt::Display for ArchiveLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display)
    }
}

/// Object store URLs (`s3://`, `gs://`, `az://`, ...): built from the URL and the environment.
#[cfg(feature = "cloud")]
mod cloud {
    use std::sync::Arc;

    use object_store::aws::AmazonS3Builder;
    use object_store::azure::MicrosoftAzureBuilder;
    use object_store::gcp::GoogleCloudStorageBuilder;
    use object_store::{ObjectStore, ObjectStoreScheme};

    use super::ArchiveLocation;

    /// The schemes this build reads, for messages.
    const SCHEMES: &str = "s3://, gs://, az://, abfs(s)://, azure://";

    pub(super) fn parse(location: &str, scheme: &str) -> Result<ArchiveLocation, String> {
        let url = url::Url::parse(location).map_err(|e| format!("not a valid URL: {e}"))?;
        let (kind, prefix) = ObjectStoreScheme::parse(&url).map_err(|_| unsupported(scheme))?;
        let store: Arc<dyn ObjectStore> = match kind {
            ObjectStoreScheme::AmazonS3 => {
                Arc::new(AmazonS3Builder::from_env().with_url(location).build().map_err(|e| e.to_string())?)
            }
            ObjectStoreScheme::GoogleCloudStorage => Arc::new(
                GoogleCloudStorageBuilder::from_env().with_url(location).build().map_err(|e| e.to_string())?,
            ),
            ObjectStoreScheme::MicrosoftAzure => {
                Arc::new(MicrosoftAzureBuilder::from_env().with_url(location).build().map_err(|e| e.to_string())?)
            }
            _ => return Err(unsupported(scheme)),
        };
        Ok(ArchiveLocation::new(store, prefix, location))
    }

    fn unsupported(scheme: &str) -> String {
        format!("scheme {scheme}:// is not an archive location (a local directory, file://, or {SCHEMES})")
    }
}

/// Without the `cloud` feature: only local directories and `file://`.
#[cfg(not(feature = "cloud"))]
mod cloud {
    use super::ArchiveLocation;

    pub(super) fn parse(_location: &str, scheme: &str) -> Result<ArchiveLocation, String> {
        Err(format!(
            "scheme {scheme}:// is not supported by this build (only local directories and file://; \
             object stores need the `cloud` feature, docs/archive.md)"
        ))
    }
}

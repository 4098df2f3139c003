//! [`ArchiveLocation`]: where an archive lives, an object store and a prefix in it.
//!
//! `ArchiveLocation::parse` takes a local directory (`/var/archive/2026-03`, `./a`) or a
//! `file://` URL. Other schemes (`s3://`, `gs://`, `az://`) name object stores that need
//! object_store features this build leaves off (docs/archive.md); a caller that has one builds
//! its `ObjectStore` and uses [`ArchiveLocation::new`].

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
            Some((scheme, _)) => {
                return Err(bad(format!(
                    "scheme {scheme}:// is not supported by this build (only local directories and file://; \
                     object stores need object_store's aws/gcp/azure features, docs/archive.md)"
                )));
            }
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

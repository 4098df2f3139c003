//! [`ArchiveError`]: why an export, a verification or a read could not run. What a verification
//! FINDS wrong is not an error but its report ([`crate::VerifyReport`]).

use load_agent_avro::archive::ArchiveFileError;
use load_agent_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The archive location is not a usable path or URL.
    #[error("archive location {location:?}: {reason}")]
    BadLocation { location: String, reason: String },
    /// A `--month` that is not `YYYY-MM`.
    #[error("month {month:?}: expected YYYY-MM (e.g. 2026-03)")]
    BadMonth { month: String },
    /// The location holds no `manifest.json`: nothing was exported there, or an export did not
    /// finish (its files are written before the manifest). Files without a manifest are never
    /// trusted.
    #[error(
        "no manifest.json in {location}: {} — not an archive (export again to finish it)",
        if *files == 0 { "the location is empty".to_owned() } else { format!("{files} file(s) without a manifest, an export that did not finish") }
    )]
    NoManifest { location: String, files: usize },
    /// The manifest does not parse, or names something impossible.
    #[error("{location}/manifest.json: {reason}")]
    Manifest { location: String, reason: String },
    /// The location already holds an archive of other loads: an export never replaces it.
    #[error(
        "{location} already holds an archive of other loads ({existing} load(s), exported {exported_at}); export to another location"
    )]
    ManifestExists { location: String, existing: usize, exported_at: String },
    /// An export with no load to write.
    #[error("nothing to export: the selection has no load with a log")]
    EmptySelection,
    #[error("{location}/{path}: {source}")]
    ObjectStore {
        location: String,
        path: String,
        #[source]
        source: object_store::Error,
    },
    /// An archive file does not read, or does not hold what the manifest says.
    #[error("{location}/{path}: {reason}")]
    File { location: String, path: String, reason: String },
    #[error("{location}/{path}: {source}")]
    Avro {
        location: String,
        path: String,
        #[source]
        source: ArchiveFileError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

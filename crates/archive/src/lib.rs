//! Archives of load logs (issue 18, docs/archive.md): the logs of chosen loads (a month's, the
//! delivered ones, or listed ids) written as Avro object container files with a
//! `manifest.json` of checksums to a directory or object-store prefix, verified against the
//! store before anything is dropped, and read back as the store reads a log.
//!
//! Layout:
//! - [`export`]: [`Month`], [`Selection`], [`select_loads`], [`export()`](export::export) with
//!   [`ExportOptions`]: files first, manifest last (each one atomic put).
//! - [`read`]: [`Archive`] — `open` (the manifest, checked), `read_load` (a log in the type
//!   `EventStore::read` returns), `read_stored`, `verify` ([`VerifyReport`]).
//! - [`manifest`]: [`Manifest`], what `manifest.json` holds.
//! - [`location`]: [`ArchiveLocation`], an object store and a prefix (a local directory or a
//!   `file://` URL from a string).
//! - [`error`]: [`ArchiveError`], why an export, a verification or a read could not run.
//!
//! The file format (the Avro record, its schema, the embedded LogEntry schemas) is
//! `load_agent_avro::archive`; this crate adds the IO.
//!
//! Architecture invariant: the archive moves stored rows; it never decides, never projects a
//! load's state (callers fold what `read_load` returns), never deletes from the store (a later
//! retention job does, after a clean [`VerifyReport`]), knows no SQL (it goes through
//! `EventStore` and `LoadIndex`) and never reads the clock (the export time is passed in).

pub mod error;
pub mod export;
pub mod location;
pub mod manifest;
pub mod read;

pub use error::ArchiveError;
pub use export::{ExportOptions, Month, Selection, export, select_loads};
pub use location::ArchiveLocation;
pub use manifest::{FileEntry, LoadEntry, MANIFEST, Manifest};
pub use read::{Archive, Finding, Problem, VerifyReport};

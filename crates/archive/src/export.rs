//! Choosing loads ([`Month`], [`select_loads`]) and writing an archive of them ([`export`]).
//!
//! Files first, manifest last: each file is one atomic `put` (object_store guarantees that no
//! reader sees a partial object, on the local filesystem as on S3), and the manifest is put
//! after every file it names, so a crash leaves either the previous manifest or a location
//! without one (reported, never trusted). File bytes are a function of their rows (the Avro
//! sync marker is derived from them), so exporting the same logs again writes the same files.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use futures::{StreamExt, TryStreamExt};
use load_agent_avro::archive::{
    ARCHIVE_CODEC, ArchivedLogEntry, archive_schema_canonical_form, write_archive_file,
};
use load_agent_domain::Stage;
use load_agent_store::{EventStore, LoadIndex, StoredEntry};
use object_store::{ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

use crate::error::ArchiveError;
use crate::location::ArchiveLocation;
use crate::manifest::{FORMAT, FileEntry, LoadEntry, MANIFEST, Manifest, SchemaInfo, Totals};
use crate::read::read_manifest;

/// A calendar month in UTC, `YYYY-MM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Month {
    pub year: i32,
    pub month: u32,
}

impl Month {
    pub fn parse(s: &str) -> Result<Self, ArchiveError> {
        let bad = || ArchiveError::BadMonth { month: s.to_owned() };
        let (y, m) = s.split_once('-').ok_or_else(bad)?;
        if y.len() != 4 || m.len() != 2 {
            return Err(bad());
        }
        let month = Month { year: y.parse().map_err(|_| bad())?, month: m.parse().map_err(|_| bad())? };
        month.bounds().map(|_| month).ok_or_else(bad)
    }

    /// `[first instant, first instant of the next month)`.
    pub fn bounds(self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let first = NaiveDate::from_ymd_opt(self.year, self.month, 1)?;
        let next = first.checked_add_months(chrono::Months::new(1))?;
        let at = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|t| Utc.from_utc_datetime(&t));
        Some((at(first)?, at(next)?))
    }
}

impl std::fmt::Display for Month {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

impl From<DateTime<Utc>> for Month {
    fn from(t: DateTime<Utc>) -> Self {
        Month { year: t.year(), month: t.month() }
    }
}

/// Which loads to archive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// The loads whose log started (first entry recorded) in this month.
    pub month: Option<Month>,
    /// These loads (with `month`: those of them that started in it).
    pub load_ids: Vec<String>,
    /// Only loads whose `load_summary` says delivered (a load without a summary row is left out).
    pub closed_only: bool,
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(m) = self.month {
            parts.push(format!("loads started in {m}"));
        }
        if !self.load_ids.is_empty() {
            parts.push(format!("{} load id(s)", self.load_ids.len()));
        }
        if self.closed_only {
            parts.push("delivered only".into());
        }
        if parts.is_empty() {
            parts.push("nothing".into());
        }
        f.write_str(&parts.join(", "))
    }
}

/// The load ids of `selection` that have a log, sorted and without repeats. The month is one
/// query (`load_ids_started_between`); `closed_only` reads each candidate's summary row (a
/// primary-key lookup).
pub async fn select_loads(
    events: &dyn EventStore,
    index: &dyn LoadIndex,
    selection: &Selection,
) -> Result<Vec<String>, ArchiveError> {
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let listed: BTreeSet<&str> = selection.load_ids.iter().map(String::as_str).collect();
    if let Some(month) = selection.month {
        let (from, until) = month.bounds().ok_or(ArchiveError::BadMonth { month: month.to_string() })?;
        for id in events.load_ids_started_between(from, until, usize::MAX).await? {
            if listed.is_empty() || listed.contains(id.as_str()) {
                ids.insert(id);
            }
        }
    } else {
        for id in listed {
            let (entries, _) = events.read_since(id, 0).await?;
            if !entries.is_empty() {
                ids.insert(id.to_owned());
            }
        }
    }
    if selection.closed_only {
        let mut closed = BTreeSet::new();
        for id in ids {
            if index.summary(&id).await?.is_some_and(|s| s.stage == Stage::Delivered) {
                closed.insert(id);
            }
        }
        ids = closed;
    }
    Ok(ids.into_iter().collect())
}

/// How to write an archive.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Loads per file (the last file may hold fewer). Default 500.
    pub loads_per_file: usize,
    /// What the manifest records as the selection.
    pub selection: String,
    /// The export's time (passed in: this crate never reads the clock).
    pub exported_at: DateTime<Utc>,
    /// Loads read from the store at once.
    pub read_concurrency: usize,
}

impl ExportOptions {
    pub fn new(selection: impl Into<String>, exported_at: DateTime<Utc>) -> Self {
        ExportOptions { loads_per_file: 500, selection: selection.into(), exported_at, read_concurrency: 8 }
    }
}

/// Writes the logs of `load_ids` (each a whole log, as stored) to `location`: files of
/// `loads_per_file` loads in load id order (`part-00000.avro`, ...), then `manifest.json`.
///
/// Refuses a location whose manifest names a different set of loads ([`ArchiveError::ManifestExists`]);
/// the same set is exported again (idempotent: unchanged logs give the same files).
pub async fn export(
    events: &dyn EventStore,
    load_ids: &[String],
    location: &ArchiveLocation,
    options: &ExportOptions,
) -> Result<Manifest, ArchiveError> {
    let ids: Vec<String> = load_ids.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    if ids.is_empty() {
        return Err(ArchiveError::EmptySelection);
    }
    match read_manifest(location).await {
        Ok(existing) => {
            let theirs: BTreeSet<&str> = existing.load_ids().collect();
            let ours: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
            if theirs != ours {
                return Err(ArchiveError::ManifestExists {
                    location: location.to_string(),
                    existing: theirs.len(),
                    exported_at: existing.exported_at.to_rfc3339(),
                });
            }
        }
        Err(ArchiveError::NoManifest { .. }) => {}
        Err(e) => return Err(e),
    }
    let canonical = archive_schema_canonical_form().map_err(|source| ArchiveError::Avro {
        location: location.to_string(),
        path: String::new(),
        source,
    })?;
    let mut schema_ids = BTreeSet::new();
    let mut files = Vec::new();
    for (n, chunk) in ids.chunks(options.loads_per_file.max(1)).enumerate() {
        let path = format!("part-{n:05}.avro");
        let logs: Vec<(String, Vec<StoredEntry>)> = futures::stream::iter(chunk.iter().cloned())
            .map(|id| async move { events.read_stored(&id).await.map(|rows| (id, rows)) })
            .buffered(options.read_concurrency.max(1))
            .try_collect()
            .await?;
        let mut rows = Vec::new();
        let mut loads = Vec::with_capacity(logs.len());
        for (load_id, stored) in logs {
            if stored.is_empty() {
                continue; // no log (any more): nothing to archive for it
            }
            loads.push(LoadEntry {
                load_id: load_id.clone(),
                entries: stored.len() as u64,
                first_seq: stored.first().map_or(0, |r| r.seq),
                last_seq: stored.last().map_or(0, |r| r.seq),
            });
            for r in stored {
                schema_ids.insert(r.schema_id);
                rows.push(archived(&load_id, r));
            }
        }
        if loads.is_empty() {
            continue;
        }
        let bytes = write_archive_file(&rows, marker(&path, &rows)).map_err(|source| ArchiveError::Avro {
            location: location.to_string(),
            path: path.clone(),
            source,
        })?;
        let entry = FileEntry {
            path: path.clone(),
            bytes: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(&bytes)),
            entries: rows.len() as u64,
            loads,
        };
        put(location, &path, bytes).await?;
        files.push(entry);
    }
    if files.is_empty() {
        return Err(ArchiveError::EmptySelection);
    }
    let totals = Totals {
        files: files.len() as u64,
        loads: files.iter().map(|f| f.loads.len() as u64).sum(),
        entries: files.iter().map(|f| f.entries).sum(),
        bytes: files.iter().map(|f| f.bytes).sum(),
    };
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        exported_at: options.exported_at,
        selection: options.selection.clone(),
        schema: SchemaInfo {
            name: "load_agent.archive.ArchivedLogEntry".to_owned(),
            fingerprint_sha256: hex::encode(Sha256::digest(canonical.as_bytes())),
            log_entry_schema_ids: schema_ids.into_iter().collect(),
        },
        codec: ARCHIVE_CODEC.to_owned(),
        files,
        totals,
    };
    let mut json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| ArchiveError::Manifest { location: location.to_string(), reason: e.to_string() })?;
    json.push(b'\n');
    put(location, MANIFEST, json).await?;
    Ok(manifest)
}

fn archived(load_id: &str, r: StoredEntry) -> ArchivedLogEntry {
    ArchivedLogEntry {
        load_id: load_id.to_owned(),
        seq: r.seq,
        entry_id: r.entry_id,
        kind: r.kind,
        recorded_at_micros: r.recorded_at.timestamp_micros(),
        llm_cost_usd: r.llm_cost_usd,
        schema_id: r.schema_id,
        body: r.body,
    }
}

/// The file's Avro sync marker: the first 16 bytes of a SHA-256 over its name and rows, so the
/// same rows give the same file.
fn marker(path: &str, rows: &[ArchivedLogEntry]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    for r in rows {
        h.update(r.load_id.as_bytes());
        h.update(r.seq.to_be_bytes());
        h.update(r.schema_id.to_be_bytes());
        h.update((r.body.len() as u64).to_be_bytes());
        h.update(&r.body);
    }
    let digest = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

async fn put(location: &ArchiveLocation, name: &str, bytes: Vec<u8>) -> Result<(), ArchiveError> {
    location.store.put(&location.child(name), PutPayload::from(bytes)).await.map(|_| ()).map_err(|source| {
        ArchiveError::ObjectStore { location: location.to_string(), path: name.to_owned(), source }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_parse_strictly_and_bound_the_month() {
        let m = Month::parse("2026-12").expect("a month");
        let (from, until) = m.bounds().expect("bounds");
        assert_eq!(from.to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(until.to_rfc3339(), "2027-01-01T00:00:00+00:00");
        for bad in ["2026-13", "2026-1", "26-01", "2026/01", "", "2026-00", "abcd-ef"] {
            assert!(matches!(Month::parse(bad), Err(ArchiveError::BadMonth { .. })), "{bad}");
        }
    }
}

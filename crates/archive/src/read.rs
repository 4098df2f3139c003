//! Reading an archive back: [`Archive::open`] (the manifest, checked), [`Archive::read_load`] (a
//! load's log in the type [`EventStore::read`] returns, so inspect, replay and projection share
//! their code with the live log) and [`Archive::verify`] (every file against its checksum, the
//! manifest and, given a store, the store's rows byte for byte).

use std::collections::{BTreeMap, BTreeSet};

use chrono::DateTime;
use futures::TryStreamExt;
use load_agent_avro::SchemaId;
use load_agent_avro::archive::{ArchivedLogEntry, read_archive_file};
use load_agent_avro::log_entry::decode_log_entry;
use load_agent_domain::LogEntry;
use load_agent_store::{EventStore, StoredEntry};
use object_store::ObjectStoreExt;
use sha2::{Digest, Sha256};

use crate::error::ArchiveError;
use crate::location::ArchiveLocation;
use crate::manifest::{FileEntry, MANIFEST, Manifest};

/// An archive whose manifest was read and checked.
#[derive(Debug, Clone)]
pub struct Archive {
    location: ArchiveLocation,
    manifest: Manifest,
}

/// The manifest at `location`; [`ArchiveError::NoManifest`] (with the number of files found
/// there) when there is none.
pub(crate) async fn read_manifest(location: &ArchiveLocation) -> Result<Manifest, ArchiveError> {
    let bytes = match get(location, MANIFEST).await {
        Ok(b) => b,
        Err(ArchiveError::ObjectStore { source: object_store::Error::NotFound { .. }, .. }) => {
            let files = list(location).await?.len();
            return Err(ArchiveError::NoManifest { location: location.to_string(), files });
        }
        Err(e) => return Err(e),
    };
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| ArchiveError::Manifest { location: location.to_string(), reason: e.to_string() })?;
    manifest.check().map_err(|reason| ArchiveError::Manifest { location: location.to_string(), reason })?;
    Ok(manifest)
}

async fn get(location: &ArchiveLocation, name: &str) -> Result<Vec<u8>, ArchiveError> {
    let err =
        |source| ArchiveError::ObjectStore { location: location.to_string(), path: name.to_owned(), source };
    let result = location.store.get(&location.child(name)).await.map_err(err)?;
    Ok(result.bytes().await.map_err(err)?.to_vec())
}

/// The names (relative to the prefix) of every object at `location`.
async fn list(location: &ArchiveLocation) -> Result<Vec<String>, ArchiveError> {
    let metas: Vec<object_store::ObjectMeta> =
        location.store.list(Some(&location.prefix)).try_collect().await.map_err(|source| {
            ArchiveError::ObjectStore { location: location.to_string(), path: String::new(), source }
        })?;
    let mut names: Vec<String> = metas.iter().map(|m| location.relative(&m.location)).collect();
    names.sort();
    Ok(names)
}

impl Archive {
    pub async fn open(location: ArchiveLocation) -> Result<Self, ArchiveError> {
        let manifest = read_manifest(&location).await?;
        Ok(Archive { location, manifest })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn location(&self) -> &ArchiveLocation {
        &self.location
    }

    /// A load's whole log and its version, exactly as [`EventStore::read`] returns it
    /// (`(vec![], 0)` for a load the archive does not hold). The file is checked against its
    /// SHA-256 first; each body is decoded with its own writer schema id.
    pub async fn read_load(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), ArchiveError> {
        let Some((file, _)) = self.manifest.find(load_id) else {
            return Ok((Vec::new(), 0));
        };
        let rows = self.read_file(file).await?;
        let mut by_load = self.group(file, rows)?;
        let rows = by_load.remove(load_id).unwrap_or_default();
        let version = rows.len() as u64;
        let entries = rows
            .iter()
            .map(|r| {
                decode_log_entry(SchemaId(r.schema_id), &r.body).map_err(|e| {
                    self.file_error(
                        file,
                        format!(
                            "load {load_id} entry #{} (schema {}) does not decode: {e}",
                            r.seq, r.schema_id
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((entries, version))
    }

    /// A load's rows as stored (what [`EventStore::read_stored`] returns), from the archive.
    pub async fn read_stored(&self, load_id: &str) -> Result<Vec<StoredEntry>, ArchiveError> {
        let Some((file, _)) = self.manifest.find(load_id) else {
            return Ok(Vec::new());
        };
        let rows = self.read_file(file).await?;
        let rows = self.group(file, rows)?.remove(load_id).unwrap_or_default();
        rows.into_iter().map(|r| self.stored(file, r)).collect()
    }

    fn file_error(&self, file: &FileEntry, reason: String) -> ArchiveError {
        ArchiveError::File { location: self.location.to_string(), path: file.path.clone(), reason }
    }

    /// The file's rows after its checksum and size are checked.
    async fn read_file(&self, file: &FileEntry) -> Result<Vec<ArchivedLogEntry>, ArchiveError> {
        let bytes = get(&self.location, &file.path).await?;
        if bytes.len() as u64 != file.bytes {
            return Err(
                self.file_error(file, format!("{} bytes, the manifest says {}", bytes.len(), file.bytes))
            );
        }
        let sha = hex::encode(Sha256::digest(&bytes));
        if sha != file.sha256 {
            return Err(self.file_error(file, format!("SHA-256 {sha}, the manifest says {}", file.sha256)));
        }
        read_archive_file(&bytes).map(|f| f.rows).map_err(|source| ArchiveError::Avro {
            location: self.location.to_string(),
            path: file.path.clone(),
            source,
        })
    }

    /// The file's rows by load, checked against the manifest: the same loads in the same order,
    /// each with the entries and seq range listed, seqs `1..=n`.
    fn group(
        &self,
        file: &FileEntry,
        rows: Vec<ArchivedLogEntry>,
    ) -> Result<BTreeMap<String, Vec<ArchivedLogEntry>>, ArchiveError> {
        let mut by_load: BTreeMap<String, Vec<ArchivedLogEntry>> = BTreeMap::new();
        let mut order = Vec::new();
        for r in rows {
            let rows = by_load.entry(r.load_id.clone()).or_default();
            if rows.is_empty() {
                order.push(r.load_id.clone());
            }
            if r.seq != rows.len() as u64 + 1 {
                return Err(self.file_error(
                    file,
                    format!("load {} has seq {} where {} belongs", r.load_id, r.seq, rows.len() + 1),
                ));
            }
            rows.push(r);
        }
        let listed: Vec<&str> = file.loads.iter().map(|l| l.load_id.as_str()).collect();
        if order != listed {
            return Err(
                self.file_error(file, format!("holds loads {order:?}, the manifest lists {listed:?}"))
            );
        }
        for l in &file.loads {
            let n = by_load.get(&l.load_id).map_or(0, Vec::len) as u64;
            if n != l.entries {
                return Err(self.file_error(
                    file,
                    format!("load {} has {n} entries, the manifest says {}", l.load_id, l.entries),
                ));
            }
        }
        Ok(by_load)
    }

    fn stored(&self, file: &FileEntry, r: ArchivedLogEntry) -> Result<StoredEntry, ArchiveError> {
        let recorded_at = DateTime::from_timestamp_micros(r.recorded_at_micros).ok_or_else(|| {
            self.file_error(file, format!("load {} entry #{}: recorded_at out of range", r.load_id, r.seq))
        })?;
        Ok(StoredEntry {
            seq: r.seq,
            entry_id: r.entry_id,
            kind: r.kind,
            recorded_at,
            llm_cost_usd: r.llm_cost_usd,
            schema_id: r.schema_id,
            body: r.body,
        })
    }

    /// Re-reads every file the manifest names. Each file: present, its size and SHA-256, it reads
    /// as an archive file, its loads and entry counts are the manifest's, every body decodes.
    /// With `events`, each load's rows also equal the store's rows (count, seq range, every
    /// column and the body bytes). Files at the location that the manifest does not name are
    /// listed as stray (an interrupted later export; not a problem of this archive).
    pub async fn verify(&self, events: Option<&dyn EventStore>) -> Result<VerifyReport, ArchiveError> {
        let mut report = VerifyReport {
            location: self.location.to_string(),
            compared_with_store: events.is_some(),
            ..VerifyReport::default()
        };
        for file in &self.manifest.files {
            report.files += 1;
            let problem = |load_id: Option<&str>, what: Problem| Finding {
                file: file.path.clone(),
                load_id: load_id.map(str::to_owned),
                problem: what,
            };
            let rows = match self.read_file(file).await {
                Ok(rows) => rows,
                Err(e) => {
                    report.findings.push(problem(None, Problem::Unreadable(e.to_string())));
                    continue;
                }
            };
            let by_load = match self.group(file, rows) {
                Ok(g) => g,
                Err(e) => {
                    report.findings.push(problem(None, Problem::ManifestMismatch(e.to_string())));
                    continue;
                }
            };
            for (load_id, rows) in by_load {
                report.loads += 1;
                report.entries += rows.len() as u64;
                if let Some(bad) = rows
                    .iter()
                    .find_map(|r| decode_log_entry(SchemaId(r.schema_id), &r.body).err().map(|e| (r.seq, e)))
                {
                    report.findings.push(problem(
                        Some(&load_id),
                        Problem::Undecodable(format!("entry #{}: {}", bad.0, bad.1)),
                    ));
                    continue;
                }
                let Some(events) = events else { continue };
                let ours = rows.into_iter().map(|r| self.stored(file, r)).collect::<Result<Vec<_>, _>>();
                let ours = match ours {
                    Ok(o) => o,
                    Err(e) => {
                        report.findings.push(problem(Some(&load_id), Problem::Undecodable(e.to_string())));
                        continue;
                    }
                };
                let theirs = events.read_stored(&load_id).await?;
                if let Some(diff) = compare(&ours, &theirs) {
                    report.findings.push(problem(Some(&load_id), Problem::StoreMismatch(diff)));
                }
            }
        }
        let named: BTreeSet<&str> = self.manifest.files.iter().map(|f| f.path.as_str()).collect();
        report.stray_files = list(&self.location)
            .await?
            .into_iter()
            .filter(|n| n != MANIFEST && !named.contains(n.as_str()))
            .collect();
        Ok(report)
    }
}

/// The first difference between a load's archived rows and the store's, if any.
fn compare(archived: &[StoredEntry], store: &[StoredEntry]) -> Option<String> {
    let range = |rows: &[StoredEntry]| match (rows.first(), rows.last()) {
        (Some(a), Some(b)) => format!("{} entries, seqs {}..={}", rows.len(), a.seq, b.seq),
        _ => "no entries".to_owned(),
    };
    if archived.len() != store.len() {
        return Some(format!("the archive has {}, the store has {}", range(archived), range(store)));
    }
    archived.iter().zip(store).find(|(a, s)| a != s).map(|(a, s)| {
        let what = if a.body != s.body || a.schema_id != s.schema_id { "body" } else { "columns" };
        format!("entry #{} differs from the store's ({what})", a.seq.max(s.seq))
    })
}

/// What [`Archive::verify`] found. A retention job requires [`is_ok`](Self::is_ok) (with the
/// store compared) before it drops anything the archive holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifyReport {
    pub location: String,
    pub files: usize,
    pub loads: usize,
    pub entries: u64,
    /// Whether each load was compared with the store's rows.
    pub compared_with_store: bool,
    pub findings: Vec<Finding>,
    /// Objects at the location the manifest does not name.
    pub stray_files: Vec<String>,
}

impl VerifyReport {
    /// No finding: every file is intact and (if compared) equals the store.
    pub fn is_ok(&self) -> bool {
        self.findings.is_empty()
    }

    /// The loads found at fault.
    pub fn loads_at_fault(&self) -> BTreeSet<&str> {
        self.findings.iter().filter_map(|f| f.load_id.as_deref()).collect()
    }
}

/// One thing wrong, in a file and possibly one load.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub file: String,
    pub load_id: Option<String>,
    pub problem: Problem,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.load_id {
            Some(id) => write!(f, "{} load {id}: {}", self.file, self.problem),
            None => write!(f, "{}: {}", self.file, self.problem),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// Missing, of another size or checksum, or not an archive file.
    Unreadable(String),
    /// Readable, but not holding what the manifest lists.
    ManifestMismatch(String),
    /// A body that does not decode with its writer schema.
    Undecodable(String),
    /// Not the store's rows.
    StoreMismatch(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Unreadable(s) => write!(f, "unreadable: {s}"),
            Problem::ManifestMismatch(s) => write!(f, "does not match the manifest: {s}"),
            Problem::Undecodable(s) => write!(f, "does not decode: {s}"),
            Problem::StoreMismatch(s) => write!(f, "does not match the store: {s}"),
        }
    }
}

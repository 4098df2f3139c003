//! `manifest.json`: what an archive holds (docs/archive.md). Written last and atomically, so a
//! manifest only ever names complete files.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The value of [`Manifest::format`] this build writes and reads.
pub const FORMAT: &str = "load-agent-archive/1";

/// The manifest's name under the archive's prefix.
pub const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// When the export ran (the caller's clock).
    pub exported_at: DateTime<Utc>,
    /// What was asked for, for people (`month 2026-03, closed loads`, `3 load ids`).
    pub selection: String,
    /// The files' writer schema.
    pub schema: SchemaInfo,
    /// The Avro codec of every file (`deflate`).
    pub codec: String,
    pub files: Vec<FileEntry>,
    pub totals: Totals,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaInfo {
    /// The full name of the files' record, `load_agent.archive.ArchivedLogEntry`.
    pub name: String,
    /// SHA-256 (hex) of the schema's Parsing Canonical Form (the Avro spec's SHA-256 fingerprint).
    pub fingerprint_sha256: String,
    /// The LogEntry writer schema ids of the archived bodies (their schemas are in each file).
    pub log_entry_schema_ids: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the archive's prefix.
    pub path: String,
    pub bytes: u64,
    /// SHA-256 (hex) of the whole file.
    pub sha256: String,
    pub entries: u64,
    /// The loads in the file, in file order (load id order).
    pub loads: Vec<LoadEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadEntry {
    pub load_id: String,
    pub entries: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub files: u64,
    pub loads: u64,
    pub entries: u64,
    pub bytes: u64,
}

impl Manifest {
    /// The file holding `load_id` and its entry there.
    pub fn find(&self, load_id: &str) -> Option<(&FileEntry, &LoadEntry)> {
        self.files.iter().find_map(|f| f.loads.iter().find(|l| l.load_id == load_id).map(|l| (f, l)))
    }

    /// Every archived load id, in file order.
    pub fn load_ids(&self) -> impl Iterator<Item = &str> {
        self.files.iter().flat_map(|f| f.loads.iter().map(|l| l.load_id.as_str()))
    }

    /// Each load the archive holds with its last seq (its version): what a retention drop
    /// checks the store's month against.
    pub fn load_versions(&self) -> Vec<(String, u64)> {
        self.files.iter().flat_map(|f| f.loads.iter().map(|l| (l.load_id.clone(), l.last_seq))).collect()
    }

    /// Checks what a manifest must hold to be trusted: the format, unique file names and load
    /// ids, entry counts that add up, seqs `1..=n` per load. Returns the first thing wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!("format {:?} is not {FORMAT:?}", self.format));
        }
        let mut paths = std::collections::HashSet::new();
        let mut loads = std::collections::HashSet::new();
        let mut totals = Totals { files: 0, loads: 0, entries: 0, bytes: 0 };
        for f in &self.files {
            if f.path.is_empty() || f.path.contains("..") || f.path == MANIFEST {
                return Err(format!("file path {:?} is not a file of the archive", f.path));
            }
            if !paths.insert(f.path.as_str()) {
                return Err(format!("file {} is listed twice", f.path));
            }
            let sum: u64 = f.loads.iter().map(|l| l.entries).sum();
            if sum != f.entries {
                return Err(format!(
                    "file {}: its loads have {sum} entries, the file says {}",
                    f.path, f.entries
                ));
            }
            for l in &f.loads {
                if !loads.insert(l.load_id.as_str()) {
                    return Err(format!("load {} is listed twice", l.load_id));
                }
                if l.first_seq != 1 || l.last_seq != l.entries {
                    return Err(format!(
                        "file {}: load {} has seqs {}..={} for {} entries (a whole log is 1..=n)",
                        f.path, l.load_id, l.first_seq, l.last_seq, l.entries
                    ));
                }
            }
            totals.files += 1;
            totals.loads += f.loads.len() as u64;
            totals.entries += f.entries;
            totals.bytes += f.bytes;
        }
        if totals != self.totals {
            return Err(format!("totals {:?} do not add up to the files' {totals:?}", self.totals));
        }
        Ok(())
    }
}

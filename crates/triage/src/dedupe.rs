//! Near-duplicates between the training files and the held-out sets: the frozen test set
//! (`test/`) and the check set by other writers (`check/`).
//!
//! A test message that also sits in training, or one that differs from a training message by
//! a typo or a name, measures memory, not generalization. Two messages are near-duplicates when
//! their keys (normalized text: case, accents, punctuation and spacing folded) are equal, or
//! when the Jaccard similarity of their keys' character trigram sets is at least
//! [`NEAR_DUPLICATE_JACCARD`]. The test set is frozen, so a near-duplicate is always removed
//! from training ([`dedupe_command`]); the crate's tests check that none is left.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::corpus::{CorpusError, LabeledMessage, jsonl_files, read_corpus};
use crate::text::normalize;
use crate::train::{TrainError, training_files};

/// Trigram Jaccard similarity at or above which two messages are near-duplicates.
pub const NEAR_DUPLICATE_JACCARD: f64 = 0.6;

/// The folder of a corpus holding the frozen test set.
pub const TEST_DIR: &str = "test";

/// The folder of a corpus holding the check sets: written by writers who wrote nothing else,
/// never trained on, measured before and after a change, like the frozen set.
pub const CHECK_DIR: &str = "check";

/// The files of the frozen test set of a corpus folder: `corpus_dir/test/*.jsonl`, in name order.
pub fn test_files(corpus_dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    jsonl_files(&corpus_dir.join(TEST_DIR))
}

/// Every held-out file: the frozen test set, then the check sets (`check/*.jsonl`; the folder
/// may be absent).
pub fn held_out_files(corpus_dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    let mut files = test_files(corpus_dir)?;
    let check = corpus_dir.join(CHECK_DIR);
    if check.is_dir() {
        files.extend(jsonl_files(&check)?);
    }
    Ok(files)
}

/// The text two messages are compared on: normalized, letters and digits only, single spaces;
/// a message with neither ("?", "👍") is compared on its normalized text.
pub fn near_duplicate_key(text: &str) -> String {
    let norm = normalize(text);
    if !norm.chars().any(char::is_alphanumeric) {
        return norm;
    }
    let mut out = String::with_capacity(norm.len());
    for word in norm.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The character trigrams of a key, padded with a space at both ends, hashed, sorted, unique.
fn trigrams(key: &str) -> Vec<u64> {
    let padded: Vec<char> = std::iter::once(' ').chain(key.chars()).chain(std::iter::once(' ')).collect();
    let mut grams: Vec<u64> = padded
        .windows(3)
        .map(|w| w.iter().fold(0u64, |h, &c| h.wrapping_mul(0x0100_0000_01b3) ^ u64::from(u32::from(c))))
        .collect();
    grams.sort_unstable();
    grams.dedup();
    grams
}

/// A training message that nearly repeats a test message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NearDuplicate {
    /// Index into the training messages.
    pub train: usize,
    /// Index into the test messages.
    pub test: usize,
    /// Trigram Jaccard similarity of the two keys (1 for equal keys).
    pub similarity: f64,
}

/// Every (training, test) pair of near-duplicates, by training index then test index.
pub fn near_duplicates(train: &[LabeledMessage], test: &[LabeledMessage]) -> Vec<NearDuplicate> {
    let test_keys: Vec<String> = test.iter().map(|m| near_duplicate_key(&m.text)).collect();
    let test_grams: Vec<Vec<u64>> = test_keys.iter().map(|k| trigrams(k)).collect();
    let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut postings: HashMap<u64, Vec<usize>> = HashMap::new();
    for (j, (key, grams)) in test_keys.iter().zip(&test_grams).enumerate() {
        by_key.entry(key.as_str()).or_default().push(j);
        for &g in grams {
            postings.entry(g).or_default().push(j);
        }
    }
    let mut out = Vec::new();
    let mut shared = vec![0usize; test.len()];
    let mut touched = Vec::new();
    for (i, message) in train.iter().enumerate() {
        let key = near_duplicate_key(&message.text);
        let grams = trigrams(&key);
        for &g in &grams {
            for &j in postings.get(&g).map_or(&[][..], Vec::as_slice) {
                if shared[j] == 0 {
                    touched.push(j);
                }
                shared[j] += 1;
            }
        }
        let equal = by_key.get(key.as_str()).map_or(&[][..], Vec::as_slice);
        let mut hits: Vec<NearDuplicate> =
            equal.iter().map(|&j| NearDuplicate { train: i, test: j, similarity: 1.0 }).collect();
        for &j in &touched {
            let union = grams.len() + test_grams[j].len() - shared[j];
            let similarity = shared[j] as f64 / union.max(1) as f64;
            if similarity >= NEAR_DUPLICATE_JACCARD && !equal.contains(&j) {
                hits.push(NearDuplicate { train: i, test: j, similarity });
            }
            shared[j] = 0;
        }
        touched.clear();
        hits.sort_by_key(|h| h.test);
        out.extend(hits);
    }
    out
}

/// What [`dedupe_command`] removed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DedupeReport {
    /// Test messages compared against.
    pub test_messages: usize,
    /// Training messages read.
    pub training_messages: usize,
    /// Per training file: its path and the 1-based lines removed (or to remove, in a dry run).
    pub removed: Vec<(String, Vec<usize>)>,
}

impl DedupeReport {
    /// Lines removed over every file.
    pub fn removed_lines(&self) -> usize {
        self.removed.iter().map(|(_, lines)| lines.len()).sum()
    }
}

/// What `load-agent triage dedupe` runs: removes from every training file of `corpus_dir` the
/// lines that are near-duplicates of a held-out line (frozen test or check set; those are never
/// changed). With `dry_run` nothing is written.
pub fn dedupe_command(corpus_dir: &Path, dry_run: bool) -> Result<DedupeReport, TrainError> {
    let mut test = Vec::new();
    for file in held_out_files(corpus_dir)? {
        test.extend(read_corpus(&file)?);
    }
    let mut report = DedupeReport { test_messages: test.len(), training_messages: 0, removed: Vec::new() };
    for file in training_files(corpus_dir)? {
        let messages = read_corpus(&file)?;
        report.training_messages += messages.len();
        let mut lines: Vec<usize> = near_duplicates(&messages, &test)
            .iter()
            .filter_map(|d| messages[d.train].origin.as_ref().map(|o| o.line))
            .collect();
        lines.dedup();
        if lines.is_empty() {
            continue;
        }
        if !dry_run {
            let text = std::fs::read_to_string(&file)
                .map_err(|source| CorpusError::Read { path: file.clone(), source })?;
            let mut kept = String::with_capacity(text.len());
            for (i, line) in text.lines().enumerate() {
                if lines.binary_search(&(i + 1)).is_err() {
                    kept.push_str(line);
                    kept.push('\n');
                }
            }
            std::fs::write(&file, kept).map_err(|source| TrainError::Write { path: file.clone(), source })?;
        }
        report.removed.push((file.display().to_string(), lines));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intent::Intent;

    fn msgs(texts: &[&str]) -> Vec<LabeledMessage> {
        texts.iter().map(|t| LabeledMessage::new(*t, Intent::Other)).collect()
    }

    #[test]
    fn keys_fold_case_accents_punctuation_and_spacing() {
        assert_eq!(near_duplicate_key("  Ya LLEGUÉ,  al  dock!! "), "ya llegue al dock");
        assert_eq!(near_duplicate_key("ETA: 2:30 pm"), "eta 2 30 pm");
        assert_eq!(near_duplicate_key("?!"), "?!");
        assert_ne!(near_duplicate_key("👍"), near_duplicate_key("?"));
    }

    #[test]
    fn equal_keys_and_close_variants_are_near_duplicates_and_different_messages_are_not() {
        let train = msgs(&[
            "Truck broke down on I-40, need help",
            "truck broke down on i40 need help!!",
            "eta 4:15",
            "STOP",
            "whats the po number for the pickup",
        ]);
        let test = msgs(&["truck broke down on I-40 need help", "eta 2:30", "stop."]);
        let dups = near_duplicates(&train, &test);
        let pairs: Vec<(usize, usize)> = dups.iter().map(|d| (d.train, d.test)).collect();
        assert_eq!(pairs, vec![(0, 0), (1, 0), (3, 2)]);
        assert_eq!(dups[0].similarity, 1.0);
        assert!(dups[1].similarity >= NEAR_DUPLICATE_JACCARD && dups[1].similarity < 1.0);
    }

    #[test]
    fn dedupe_removes_training_lines_only_and_a_dry_run_writes_nothing() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("train")).expect("train dir");
        std::fs::create_dir_all(dir.path().join("test")).expect("test dir");
        let train = "{\"text\":\"ok\",\"intent\":\"ack\"}\n{\"text\":\"truck broke down on I-40\",\"intent\":\"problem_report\"}\n{\"text\":\"eta 3\",\"intent\":\"eta_given\"}\n";
        let test = "{\"text\":\"Truck broke down on I40!\",\"intent\":\"problem_report\"}\n";
        let train_path = dir.path().join("train/a.jsonl");
        std::fs::write(&train_path, train).expect("write train");
        std::fs::write(dir.path().join("test/frozen.jsonl"), test).expect("write test");

        let report = dedupe_command(dir.path(), true).expect("dry run");
        assert_eq!(report.removed_lines(), 1);
        assert_eq!(report.removed[0].1, vec![2]);
        assert_eq!(std::fs::read_to_string(&train_path).expect("read"), train);

        dedupe_command(dir.path(), false).expect("dedupe");
        let left = std::fs::read_to_string(&train_path).expect("read");
        assert_eq!(left.lines().count(), 2);
        assert!(!left.contains("I-40"));
        assert_eq!(std::fs::read_to_string(dir.path().join("test/frozen.jsonl")).expect("read"), test);
        assert_eq!(dedupe_command(dir.path(), false).expect("again").removed_lines(), 0);
    }
}

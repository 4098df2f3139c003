//! The bookkeeping of one assigned partition, as plain synchronous code (no Kafka, no tokio), so
//! that tests drive it directly.
//!
//! Inside a partition, records of one load run one at a time in offset order; records of
//! different loads run concurrently. A record is *unfinished* from the moment it is received
//! until its run is done (committed, already processed, or dead-lettered). The offset to store
//! is the lowest unfinished offset, or, when nothing is unfinished, one past the highest
//! received offset: never past an unfinished record.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// A record waiting for its load's turn, or running. Generic so that tests can use plain
/// offsets and the consumer owned records.
pub trait Offsetted {
    fn offset(&self) -> i64;
}

impl Offsetted for load_agent_ingest::InboundRecord {
    fn offset(&self) -> i64 {
        self.offset
    }
}

impl Offsetted for i64 {
    fn offset(&self) -> i64 {
        *self
    }
}

/// One partition's records between receipt and their stored offset.
#[derive(Debug)]
pub struct PartitionWork<R> {
    /// Offsets received and not finished (waiting or running).
    unfinished: BTreeSet<i64>,
    /// One past the highest offset received.
    next_offset: Option<i64>,
    /// The last offset handed out for storing (the next offset to consume).
    stored: Option<i64>,
    /// Records waiting behind a running record of their load, in offset order.
    waiting: HashMap<String, VecDeque<R>>,
    /// Loads with a record running.
    running: HashSet<String>,
    /// Set on revocation and shutdown: no waiting record is started any more.
    closing: bool,
}

impl<R> Default for PartitionWork<R> {
    fn default() -> Self {
        PartitionWork {
            unfinished: BTreeSet::new(),
            next_offset: None,
            stored: None,
            waiting: HashMap::new(),
            running: HashSet::new(),
            closing: false,
        }
    }
}

/// What finishing a record leads to.
#[derive(Debug, PartialEq, Eq)]
pub struct Finished<R> {
    /// The next record of the same load, to run now (the load stays running).
    pub next: Option<R>,
    /// A new offset to store (the next offset to consume), when it moved forward.
    pub store: Option<i64>,
}

impl<R: Offsetted> PartitionWork<R> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a received record of load `key`. Returns it back when it can run now (no record of
    /// its load is running; the load is then marked running), or keeps it waiting.
    pub fn push(&mut self, key: &str, record: R) -> Option<R> {
        let offset = record.offset();
        // The first record's offset is where the partition stands: nothing to store before it.
        self.stored.get_or_insert(offset);
        self.unfinished.insert(offset);
        self.next_offset = Some(self.next_offset.map_or(offset + 1, |n| n.max(offset + 1)));
        if self.closing || self.running.contains(key) {
            self.waiting.entry(key.to_owned()).or_default().push_back(record);
            None
        } else {
            self.running.insert(key.to_owned());
            Some(record)
        }
    }

    /// The running record of `key` at `offset` is done. Hands out the next record of that load
    /// (unless closing) and the offset to store if it moved forward.
    pub fn finish(&mut self, key: &str, offset: i64) -> Finished<R> {
        self.unfinished.remove(&offset);
        let next = if self.closing { None } else { self.pop_waiting(key) };
        if next.is_none() {
            self.running.remove(key);
        }
        Finished { next, store: self.advance() }
    }

    /// The running record of `key` is given up without finishing (revocation or shutdown while
    /// it was retrying): its offset stays unfinished, so it is never stored past.
    pub fn abandon(&mut self, key: &str) {
        self.running.remove(key);
    }

    fn pop_waiting(&mut self, key: &str) -> Option<R> {
        let queue = self.waiting.get_mut(key)?;
        let next = queue.pop_front();
        if queue.is_empty() {
            self.waiting.remove(key);
        }
        next
    }

    /// The offset to store now if it moved past the last one stored.
    fn advance(&mut self) -> Option<i64> {
        let committable = self.committable()?;
        if self.stored.is_some_and(|s| s >= committable) {
            return None;
        }
        self.stored = Some(committable);
        Some(committable)
    }

    /// The next offset to consume as far as this partition's work is concerned: the lowest
    /// unfinished offset, or one past the highest received. `None` before any record.
    pub fn committable(&self) -> Option<i64> {
        self.unfinished.first().copied().or(self.next_offset)
    }

    /// The last offset handed out for storing.
    pub fn stored(&self) -> Option<i64> {
        self.stored
    }

    /// Stops starting waiting records and drops them (revocation: the new owner of the
    /// partition gets them again from the committed offset). Their offsets stay unfinished, so
    /// the committable offset stays at or before the first of them.
    pub fn close(&mut self) -> usize {
        self.closing = true;
        let dropped = self.waiting.values().map(VecDeque::len).sum();
        self.waiting.clear();
        dropped
    }

    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// Loads with a record running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Records held (waiting or running): what backpressure bounds.
    pub fn buffered(&self) -> usize {
        self.running.len() + self.waiting.values().map(VecDeque::len).sum::<usize>()
    }

    /// Records received and not finished (abandoned and dropped ones included).
    pub fn unfinished(&self) -> usize {
        self.unfinished.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work() -> PartitionWork<i64> {
        PartitionWork::new()
    }

    #[test]
    fn records_of_one_load_run_one_at_a_time_in_offset_order() {
        let mut w = work();
        assert_eq!(w.push("A", 0), Some(0));
        assert_eq!(w.push("A", 1), None, "A is running");
        assert_eq!(w.push("A", 2), None);
        assert_eq!(w.finish("A", 0), Finished { next: Some(1), store: Some(1) });
        assert_eq!(w.finish("A", 1), Finished { next: Some(2), store: Some(2) });
        assert_eq!(w.finish("A", 2), Finished { next: None, store: Some(3) });
        assert_eq!(w.running(), 0);
        assert_eq!(w.push("A", 3), Some(3), "A is idle again");
    }

    #[test]
    fn different_loads_run_concurrently() {
        let mut w = work();
        assert_eq!(w.push("A", 10), Some(10));
        assert_eq!(w.push("B", 11), Some(11));
        assert_eq!(w.push("A", 12), None);
        assert_eq!(w.push("C", 13), Some(13));
        assert_eq!(w.running(), 3);
        assert_eq!(w.buffered(), 4);
    }

    #[test]
    fn the_stored_offset_never_passes_an_unfinished_record() {
        let mut w = work();
        w.push("A", 0);
        w.push("B", 1);
        w.push("C", 2);
        // B and C finish first: offset 0 is still running, nothing moves.
        assert_eq!(w.finish("B", 1).store, None);
        assert_eq!(w.finish("C", 2).store, None);
        assert_eq!(w.committable(), Some(0));
        // A finishes: everything up to 2 is done, the next offset to consume is 3.
        assert_eq!(w.finish("A", 0).store, Some(3));
    }

    #[test]
    fn the_stored_offset_stops_at_a_waiting_record() {
        let mut w = work();
        w.push("A", 5);
        w.push("A", 6);
        w.push("B", 7);
        assert_eq!(w.finish("B", 7).store, None, "5 and 6 are unfinished");
        let f = w.finish("A", 5);
        assert_eq!(f, Finished { next: Some(6), store: Some(6) });
        assert_eq!(w.finish("A", 6).store, Some(8));
    }

    #[test]
    fn an_abandoned_record_holds_the_offset_back() {
        let mut w = work();
        w.push("A", 0);
        w.push("B", 1);
        w.abandon("A");
        assert_eq!(w.finish("B", 1).store, None);
        assert_eq!(w.committable(), Some(0));
        assert_eq!(w.running(), 0);
    }

    #[test]
    fn closing_drops_waiting_records_and_keeps_their_offsets_unfinished() {
        let mut w = work();
        w.push("A", 0);
        w.push("A", 1);
        w.push("B", 2);
        w.push("B", 3);
        assert_eq!(w.close(), 2, "1 and 3 were waiting");
        // The running records may still finish; nothing new starts.
        assert_eq!(w.finish("A", 0), Finished { next: None, store: Some(1) });
        assert_eq!(w.finish("B", 2), Finished { next: None, store: None });
        assert_eq!(w.committable(), Some(1), "the new owner starts at the first dropped record");
        assert_eq!(w.push("C", 4), None, "nothing starts while closing");
    }

    #[test]
    fn an_offset_is_handed_out_once() {
        let mut w = work();
        w.push("A", 0);
        assert_eq!(w.finish("A", 0).store, Some(1));
        w.push("A", 1);
        w.abandon("A");
        w.push("B", 2);
        assert_eq!(w.finish("B", 2).store, None, "1 is unfinished and 1 was already stored");
        assert_eq!(w.stored(), Some(1));
    }

    #[test]
    fn gaps_in_offsets_are_fine() {
        // Compacted topics and transaction markers leave gaps.
        let mut w = work();
        w.push("A", 100);
        w.push("B", 104);
        assert_eq!(w.finish("A", 100).store, Some(104));
        assert_eq!(w.finish("B", 104).store, Some(105));
    }
}

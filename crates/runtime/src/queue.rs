//! The load queue (ADR 0001, ADR 0003): FIFO per `load_id`, at most one run in flight per load,
//! different loads processed concurrently. Production puts SQS FIFO or Kafka behind
//! [`LoadQueue`]; [`InProcessQueue`] is the in-process implementation used by `serve`'s
//! embedded mode, the evals and the tests.
//!
//! The serial-per-load guarantee does not rest on the queue: every commit carries the expected
//! version. The queue only makes conflicts rare.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use load_agent_domain::InboundEvent;
use tokio::sync::Notify;

/// Why an event could not be put on the queue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("the load queue is full ({capacity} events)")]
    Full { capacity: usize },
    #[error("the load queue is closed")]
    Closed,
    #[error("load queue: {0}")]
    Other(String),
}

/// One event handed to a consumer. Until it is acked or nacked, its load has a run in flight and
/// no other event of that load is handed out.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub event: InboundEvent,
    /// 1 on the first delivery, +1 on each redelivery after a nack.
    pub delivery_count: u32,
}

impl Delivery {
    pub fn load_id(&self) -> &str {
        &self.event.load_id
    }
}

/// Where events are put for the worker: the relay's `action_outcome`s, the pump's `timer_fired`
/// events, the load test's generated traffic. The [`LoadQueue`] itself, or only its sending half
/// (a producer of the inbound Kafka topic, whose consumer is the worker's, in this process or
/// another).
#[async_trait]
pub trait EventPublisher: Send + Sync + std::fmt::Debug {
    /// Appends an event at the tail of its load's queue.
    async fn publish(&self, event: InboundEvent) -> Result<(), QueueError>;
}

/// The queue the worker consumes: an [`EventPublisher`] that also hands the events out, one run
/// in flight per load.
#[async_trait]
pub trait LoadQueue: EventPublisher {
    /// The next event of a load with no run in flight, or `None` when there is none now.
    async fn try_receive(&self) -> Option<Delivery>;
    /// Waits for the next event of a load with no run in flight; `None` once closed and drained.
    async fn receive(&self) -> Option<Delivery>;
    /// The run is done (committed, already processed, or dead-lettered): releases the load.
    async fn ack(&self, delivery: &Delivery);
    /// The run gave up: the event goes back at the head of its load's queue and the load is released.
    async fn nack(&self, delivery: Delivery);
}

#[derive(Debug, Default)]
struct Inner {
    /// Pending events per load, in order. Redeliveries carry their delivery count.
    per_load: HashMap<String, VecDeque<(InboundEvent, u32)>>,
    /// Loads with pending events and no run in flight, in the order they became ready.
    ready: VecDeque<String>,
    /// The loads in `ready`, so that a publish finds whether its load is already there without
    /// walking the queue (a walk that grows with the backlog: in a saturation run, with 2,000
    /// events waiting, about 13 % of the service's CPU went to comparing load ids in it).
    queued: HashSet<String>,
    in_flight: HashSet<String>,
    len: usize,
    closed: bool,
}

impl Inner {
    fn mark_ready(&mut self, load_id: &str) {
        let has_pending = self.per_load.get(load_id).is_some_and(|q| !q.is_empty());
        if has_pending && !self.in_flight.contains(load_id) && !self.queued.contains(load_id) {
            self.queued.insert(load_id.to_string());
            self.ready.push_back(load_id.to_string());
        }
    }

    fn take(&mut self) -> Option<Delivery> {
        while let Some(load_id) = self.ready.pop_front() {
            self.queued.remove(&load_id);
            if self.in_flight.contains(&load_id) {
                continue;
            }
            let Some(q) = self.per_load.get_mut(&load_id) else { continue };
            let Some((event, count)) = q.pop_front() else { continue };
            if q.is_empty() {
                self.per_load.remove(&load_id);
            }
            self.len -= 1;
            self.in_flight.insert(load_id);
            return Some(Delivery { event, delivery_count: count });
        }
        None
    }
}

/// The in-process load queue, bounded to `capacity` pending events (in-flight ones excluded).
/// `publish` never blocks: a full queue is an error the caller handles (the relay counts it as
/// a failed attempt, the pump retries on its next pass).
#[derive(Debug)]
pub struct InProcessQueue {
    inner: Mutex<Inner>,
    capacity: usize,
    ready: Notify,
}

impl InProcessQueue {
    pub const DEFAULT_CAPACITY: usize = 100_000;

    pub fn new(capacity: usize) -> Self {
        InProcessQueue {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
            ready: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Pending events (not counting those in flight).
    pub fn len(&self) -> usize {
        self.lock().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Loads with a run in flight now.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight.len()
    }

    /// Stops handing out events once drained; `receive` then returns `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_waiters();
    }

    fn push(&self, event: InboundEvent, count: u32, front: bool) -> Result<(), QueueError> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(QueueError::Closed);
        }
        if front {
            // A redelivery never fails for capacity: the event was already counted once.
        } else if inner.len >= self.capacity {
            return Err(QueueError::Full { capacity: self.capacity });
        }
        let load_id = event.load_id.clone();
        let q = inner.per_load.entry(load_id.clone()).or_default();
        if front {
            q.push_front((event, count));
        } else {
            q.push_back((event, count));
        }
        inner.len += 1;
        inner.mark_ready(&load_id);
        drop(inner);
        self.ready.notify_one();
        Ok(())
    }

    fn release(&self, load_id: &str) {
        let mut inner = self.lock();
        inner.in_flight.remove(load_id);
        inner.mark_ready(load_id);
        let wake = !inner.ready.is_empty() || inner.closed;
        drop(inner);
        if wake {
            self.ready.notify_one();
        }
    }
}

impl Default for InProcessQueue {
    fn default() -> Self {
        InProcessQueue::new(InProcessQueue::DEFAULT_CAPACITY)
    }
}

#[async_trait]
impl EventPublisher for InProcessQueue {
    async fn publish(&self, event: InboundEvent) -> Result<(), QueueError> {
        self.push(event, 1, false)
    }
}

#[async_trait]
impl LoadQueue for InProcessQueue {
    async fn try_receive(&self) -> Option<Delivery> {
        self.lock().take()
    }

    async fn receive(&self) -> Option<Delivery> {
        loop {
            let notified = self.ready.notified();
            {
                let mut inner = self.lock();
                if let Some(d) = inner.take() {
                    let more = !inner.ready.is_empty();
                    drop(inner);
                    if more {
                        // Let another consumer pick up the next ready load.
                        self.ready.notify_one();
                    }
                    return Some(d);
                }
                if inner.closed && inner.len == 0 {
                    return None;
                }
            }
            notified.await;
        }
    }

    async fn ack(&self, delivery: &Delivery) {
        self.release(delivery.load_id());
    }

    async fn nack(&self, delivery: Delivery) {
        let load_id = delivery.event.load_id.clone();
        // The head of its load's queue, so FIFO order per load survives the redelivery.
        let count = delivery.delivery_count.saturating_add(1);
        let mut inner = self.lock();
        inner.in_flight.remove(&load_id);
        inner.per_load.entry(load_id.clone()).or_default().push_front((delivery.event, count));
        inner.len += 1;
        inner.mark_ready(&load_id);
        drop(inner);
        self.ready.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use chrono::{TimeZone, Utc};
    use load_agent_domain::{EventKind, InboundEvent};

    use super::*;

    fn ev(load: &str, id: &str) -> InboundEvent {
        InboundEvent {
            event_id: id.into(),
            load_id: load.into(),
            occurred_at: Utc.timestamp_opt(1_772_456_400, 0).single().unwrap_or_default(),
            kind: EventKind::Sms { from: "drv".into(), text: id.into() },
        }
    }

    #[tokio::test]
    async fn events_of_one_load_come_out_in_order_one_at_a_time() {
        let q = InProcessQueue::new(10);
        for id in ["a1", "a2", "a3"] {
            q.publish(ev("A", id)).await.expect("room");
        }
        let first = q.try_receive().await.expect("a1");
        assert_eq!(first.event.event_id, "a1");
        assert!(q.try_receive().await.is_none(), "a run of load A is in flight");
        q.ack(&first).await;
        let second = q.try_receive().await.expect("a2");
        assert_eq!(second.event.event_id, "a2");
        q.ack(&second).await;
        assert_eq!(q.try_receive().await.map(|d| d.event.event_id), Some("a3".into()));
    }

    #[tokio::test]
    async fn different_loads_are_handed_out_concurrently() {
        let q = InProcessQueue::new(10);
        q.publish(ev("A", "a1")).await.expect("room");
        q.publish(ev("A", "a2")).await.expect("room");
        q.publish(ev("B", "b1")).await.expect("room");
        let a = q.try_receive().await.expect("a1");
        let b = q.try_receive().await.expect("b1 while A is in flight");
        assert_eq!((a.event.event_id.as_str(), b.event.event_id.as_str()), ("a1", "b1"));
        assert_eq!(q.in_flight(), 2);
        assert!(q.try_receive().await.is_none());
    }

    #[tokio::test]
    async fn a_nack_redelivers_at_the_head_of_its_load() {
        let q = InProcessQueue::new(10);
        q.publish(ev("A", "a1")).await.expect("room");
        q.publish(ev("A", "a2")).await.expect("room");
        let first = q.try_receive().await.expect("a1");
        q.nack(first).await;
        let again = q.try_receive().await.expect("a1 again");
        assert_eq!(again.event.event_id, "a1");
        assert_eq!(again.delivery_count, 2);
    }

    #[tokio::test]
    async fn the_queue_is_bounded() {
        let q = InProcessQueue::new(2);
        q.publish(ev("A", "a1")).await.expect("room");
        q.publish(ev("B", "b1")).await.expect("room");
        assert_eq!(q.publish(ev("C", "c1")).await, Err(QueueError::Full { capacity: 2 }));
        let d = q.try_receive().await.expect("a1");
        q.ack(&d).await;
        q.publish(ev("C", "c1")).await.expect("room again");
    }

    #[tokio::test]
    async fn waiting_consumers_process_loads_in_parallel_and_each_load_serially() {
        let q = Arc::new(InProcessQueue::new(100));
        for i in 0..10 {
            q.publish(ev("A", &format!("a{i}"))).await.expect("room");
            q.publish(ev("B", &format!("b{i}"))).await.expect("room");
        }
        q.close();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let active = Arc::new(Mutex::new(HashSet::<String>::new()));
        let both_at_once = Arc::new(Mutex::new(false));
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let (q, seen, active, both) = (q.clone(), seen.clone(), active.clone(), both_at_once.clone());
            tasks.push(tokio::spawn(async move {
                while let Some(d) = q.receive().await {
                    {
                        let mut a = active.lock().unwrap_or_else(|p| p.into_inner());
                        assert!(a.insert(d.load_id().to_string()), "two runs of one load at once");
                        if a.len() == 2 {
                            *both.lock().unwrap_or_else(|p| p.into_inner()) = true;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    seen.lock().unwrap_or_else(|p| p.into_inner()).push(d.event.event_id.clone());
                    active.lock().unwrap_or_else(|p| p.into_inner()).remove(d.load_id());
                    q.ack(&d).await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("consumer");
        }
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let a: Vec<_> = seen.iter().filter(|id| id.starts_with('a')).cloned().collect();
        let b: Vec<_> = seen.iter().filter(|id| id.starts_with('b')).cloned().collect();
        assert_eq!(a, (0..10).map(|i| format!("a{i}")).collect::<Vec<_>>());
        assert_eq!(b, (0..10).map(|i| format!("b{i}")).collect::<Vec<_>>());
        assert!(
            *both_at_once.lock().unwrap_or_else(|p| p.into_inner()),
            "loads A and B never ran concurrently"
        );
    }
}

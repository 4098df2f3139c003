//! The embedded mode's in-process load queue (`load_agent_runtime::InProcessQueue`): the cost
//! of one event passing through it while others wait, as a saturated embedded service keeps
//! it (the load test's `--max-backlog` is 2,000 waiting events).
//!
//! `publish_take_ack/{waiting}`: with `waiting` events of as many loads already queued, one
//! event of a load not queued yet is published, then the event at the head is taken and
//! acknowledged, so the queue holds `waiting` events after every iteration.
//! `Throughput::Elements(1)` per event. Until 4 December 2026 a publish walked the whole ready
//! list to find whether its load was already in it, so this grew with `waiting`.
//!
//! `cargo bench -p load-agent-benches --bench queue -- --warm-up-time 1 --measurement-time 3`

use chrono::{TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_domain::{EventKind, InboundEvent};
use load_agent_runtime::queue::{EventPublisher, InProcessQueue, LoadQueue};

fn event(n: u64) -> InboundEvent {
    InboundEvent {
        event_id: format!("sms_{n}"),
        load_id: format!("load-{n:08}"),
        occurred_at: Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).single().unwrap_or_default(),
        kind: EventKind::Sms { from: "+15550001111".into(), text: "running 20 min late".into() },
    }
}

fn publish_take_ack(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime");
    let mut group = c.benchmark_group("queue");
    group.throughput(Throughput::Elements(1));
    for waiting in [1u64, 2_000, 20_000] {
        let queue = InProcessQueue::new(usize::try_from(waiting).unwrap_or(usize::MAX) + 16);
        rt.block_on(async {
            for n in 0..waiting {
                queue.publish(event(n)).await.expect("room in the queue");
            }
        });
        let mut next = waiting;
        group.bench_function(BenchmarkId::new("publish_take_ack", waiting), |b| {
            b.to_async(&rt).iter(|| {
                let e = event(next);
                next += 1;
                let queue = &queue;
                async move {
                    queue.publish(e).await.expect("room in the queue");
                    let delivery = queue.try_receive().await.expect("a queued event");
                    queue.ack(&delivery).await;
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, publish_take_ack);
criterion_main!(benches);

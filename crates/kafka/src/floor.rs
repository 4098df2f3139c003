//! The broker's own floor (issue 15: attribute before optimizing): records produced with the
//! service's exact producer settings and consumed with its exact consumer settings, on a topic
//! of their own, timed from the send call to the consumer's receipt. The load test runs it
//! beside the service, so the service's event → commit can be read against what the broker and
//! librdkafka alone cost in the same minute.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use load_agent_runtime::Shutdown;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::{ClientContext, Message};

use crate::config::KafkaConfig;
use crate::produce::Producer;

fn micros_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// The probe consumer's context: its fetches' round trips, as the load test's `floor-consumer`
/// (beside the service consumer's: the same broker answering a light topic's fetches).
struct FloorConsumer;

impl ClientContext for FloorConsumer {
    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(&statistics, None, &[], "floor-consumer");
    }
}

impl ConsumerContext for FloorConsumer {}

/// Produces `rate` small records per second to `topic` (which must exist) until `shutdown`,
/// consumes them in a group of its own, and returns each one's produce → consume latency in
/// milliseconds with the instant it was received.
pub async fn broker_floor(
    config: &KafkaConfig,
    topic: &str,
    rate: f64,
    mut shutdown: Shutdown,
) -> Result<Vec<(Instant, f64)>, KafkaError> {
    let mut reader = config.clone();
    reader.group_id = format!("{}-floor", config.group_id);
    let consumer: StreamConsumer<FloorConsumer> =
        reader.consumer_config().create_with_context(FloorConsumer)?;
    consumer.subscribe(&[topic])?;
    let producer = Producer::new(config, "floor-producer")?;
    let (topic, period) = (topic.to_owned(), Duration::from_secs_f64(1.0 / rate.max(0.1)));
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let sender = tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        let mut n = 0u64;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop_rx.changed() => return,
            }
            n += 1;
            let key = format!("floor-{}", n % 64);
            let sent = micros_now().to_be_bytes();
            // Not awaited in line: the next send does not wait for this acknowledgement.
            let p = producer.clone();
            let t = topic.clone();
            tokio::spawn(async move {
                let no_headers: [(&str, &[u8]); 0] = [];
                let _ = p.send(&t, Some(key.as_bytes()), Some(&sent), &no_headers).await;
            });
        }
    });
    let mut samples = Vec::new();
    loop {
        tokio::select! {
            _ = shutdown.recv() => break,
            received = consumer.recv() => match received {
                Ok(m) => {
                    let now = micros_now();
                    if let Some(Ok(sent)) = m.payload().map(<[u8; 8]>::try_from) {
                        let sent = u64::from_be_bytes(sent);
                        samples.push((Instant::now(), now.saturating_sub(sent) as f64 / 1000.0));
                    }
                }
                Err(e) => tracing::warn!(error = %e, "broker floor probe: consumer error"),
            }
        }
    }
    let _ = stop_tx.send(true);
    let _ = sender.await;
    Ok(samples)
}

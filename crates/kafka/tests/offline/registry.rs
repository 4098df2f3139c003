//! The schema registry path (a stub of the Confluent REST API, no broker): producers register
//! our schemas and frame with the registry's ids; the unit of work decodes records framed with
//! them, dead-letters an id the registry does not know, and retries when the registry is down.

use std::sync::Arc;

use load_agent_agent::Agent;
use load_agent_avro::inbound::encode_inbound_with_id;
use load_agent_avro::registry_client::{RegistryClient, RegistrySettings};
use load_agent_avro::registry_stub::start_stub;
use load_agent_domain::InboundEvent;
use load_agent_ingest::{InboundRecord, RecordOutcome, record_processor};
use load_agent_kafka::{KafkaConfig, register_schemas};
use load_agent_llm::FakeLlm;
use load_agent_runtime::CacheConfig;
use load_agent_runtime::{FakeClock, GroupCommitConfig, WorkerConfig};
use load_agent_store::{SqliteStore, StoreOptions};

fn client(url: &str) -> RegistryClient {
    let settings = RegistrySettings::new_builder(url.to_owned()).no_proxy().build().expect("settings");
    RegistryClient::with_settings(settings)
}

fn registration() -> InboundEvent {
    load_agent_testkit::events::registration("R1", "reg-R1", load_agent_testkit::at("2026-03-02T12:00:00Z"))
}

fn record(value: Vec<u8>, offset: i64) -> InboundRecord {
    InboundRecord {
        topic: "load-agent.events".into(),
        partition: 0,
        offset,
        timestamp_ms: None,
        key: Some(b"R1".to_vec()),
        headers: vec![],
        value: Some(value),
    }
}

#[tokio::test]
async fn records_framed_with_registry_ids_are_decoded_through_the_registry() {
    let (url, stub) = start_stub().await;
    let registry = client(&url);
    let kafka = KafkaConfig::new("unused:9092");
    let ids = register_schemas(&registry, &kafka).await.expect("registered");
    assert!(ids.inbound_event.0 >= 101 && ids.action_command.0 >= 101, "ids come from the registry: {ids:?}");
    assert!(stub.lock().expect("stub").subjects.iter().any(|(s, _)| s == "load-agent.events-value"));

    let stores = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite").into_stores();
    let agent = Arc::new(Agent::embedded().expect("SOPs"));
    let clock = Arc::new(FakeClock::new(registration().occurred_at));
    let (processor, _cache) = record_processor(
        &stores,
        agent,
        Arc::new(FakeLlm::new()),
        clock,
        WorkerConfig::default(),
        CacheConfig::default(),
        GroupCommitConfig::OFF,
    );
    let processor = processor.with_registry(Arc::new(registry));

    let ok = processor.process(&record(encode_inbound_with_id(ids.inbound_event, &registration()), 0)).await;
    assert!(matches!(ok, RecordOutcome::Committed { .. }), "{ok:?}");

    let unknown = processor
        .process(&record(encode_inbound_with_id(load_agent_avro::SchemaId(999), &registration()), 1))
        .await;
    assert!(matches!(unknown, RecordOutcome::DeadLetter(_)), "an id the registry does not know: {unknown:?}");

    // A registry that does not answer: the record is retried later, never dead-lettered.
    let down = client("http://127.0.0.1:9");
    let (p2, _) = record_processor(
        &stores,
        Arc::new(Agent::embedded().expect("SOPs")),
        Arc::new(FakeLlm::new()),
        Arc::new(FakeClock::new(registration().occurred_at)),
        WorkerConfig::default(),
        CacheConfig::default(),
        GroupCommitConfig::OFF,
    );
    let p2 = p2.with_registry(Arc::new(down));
    let retry = p2
        .process(&record(encode_inbound_with_id(load_agent_avro::SchemaId(12345), &registration()), 2))
        .await;
    assert!(matches!(retry, RecordOutcome::Retry { .. }), "{retry:?}");
}

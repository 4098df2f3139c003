//! The registry client against a small stub of the Confluent REST API (tokio TcpListener).
#![cfg(feature = "registry-client")]

mod common;

use load_agent_avro::registry_client::{RegistryClient, RegistrySettings};
use load_agent_avro::registry_stub::start_stub;
use load_agent_avro::{SchemaId, action_command, confluent, decode_inbound, inbound};
use tokio::net::TcpListener;

fn client(url: &str) -> RegistryClient {
    let settings = RegistrySettings::new_builder(url.to_owned()).no_proxy().build().expect("settings");
    RegistryClient::with_settings(settings)
}

#[tokio::test]
async fn register_lookup_latest_and_decode_with_registry_ids() {
    let (url, stub) = start_stub().await;
    let client = client(&url);
    let topic = "load-agent.events";

    assert_eq!(client.lookup(topic, "InboundEvent").await.expect("lookup"), None, "nothing registered yet");
    let id = client.register(topic, "InboundEvent").await.expect("register");
    assert_eq!(id, SchemaId(101));
    assert_eq!(client.register(topic, "InboundEvent").await.expect("register again"), id, "idempotent");
    assert_eq!(client.lookup(topic, "InboundEvent").await.expect("lookup"), Some(id));
    let latest = client.latest(topic).await.expect("latest");
    assert_eq!((latest.id, latest.version), (id, Some(1)));

    // A producer frames with the registry id; a consumer fetches the writer schema by it.
    for event in common::every_event_kind() {
        let bytes = inbound::encode_inbound_with_id(id, &event);
        assert_eq!(client.decode_inbound(&bytes).await.expect("decodes"), event);
        // The embedded registry does not know id 101: a clear error, not a wrong decode.
        assert_eq!(decode_inbound(&bytes).map_err(|e| e.code()), Err("unknown_schema_id"));
    }

    // schema_registry_converter's encoder produces the same bytes.
    let event = common::sms_event();
    let bytes = client.encode_inbound(topic, &event).await.expect("encoder");
    assert_eq!(bytes, inbound::encode_inbound_with_id(id, &event));

    let requests = stub.lock().map(|s| s.requests.clone()).unwrap_or_default();
    assert!(requests.iter().any(|r| r.starts_with("GET /schemas/ids/101")), "{requests:?}");
    assert_eq!(
        requests.iter().filter(|r| r.starts_with("GET /schemas/ids/")).count(),
        1,
        "writer schemas are cached"
    );
    assert!(requests.iter().any(|r| r == "POST /subjects/load-agent.events-value/versions"), "{requests:?}");
}

#[tokio::test]
async fn action_commands_and_errors() {
    let (url, _stub) = start_stub().await;
    let client = client(&url);
    let id = client.register("load-agent.actions.sms", "ActionCommand").await.expect("register");
    let action = &common::every_action()[0];
    let bytes = action_command::encode_action_command_with_id(
        id,
        action,
        "481207",
        5,
        &load_agent_avro::Addresses::NONE,
    );
    let cmd = client.decode_action_command(&bytes).await.expect("decodes");
    assert_eq!(cmd.to_action(), *action);

    // An id the registry does not have: a permanent registry error.
    let err = client.decode_inbound(&confluent::frame(SchemaId(999), b"\x00")).await.expect_err("unknown id");
    assert!(!err.is_retryable(), "{err}");
    // An id of another record: a decode error (DLQ).
    let err = client.decode_inbound(&bytes).await.expect_err("a command is no event");
    assert!(matches!(err, load_agent_avro::registry_client::RegistryClientError::Decode(_)), "{err}");
    // Broken framing never reaches the registry.
    assert!(client.decode_inbound(&[1, 2]).await.is_err());
    // Unknown record names are refused locally.
    assert!(client.register("t", "Nope").await.is_err());
}

#[tokio::test]
async fn an_unreachable_registry_is_retryable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let err = client(&url)
        .decode_inbound(&inbound::encode_inbound_with_id(SchemaId(7), &common::sms_event()))
        .await;
    let err = err.expect_err("no registry");
    assert!(err.is_retryable(), "{err}");
}

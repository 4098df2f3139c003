//! A Confluent-compatible schema registry (Confluent, Karapace, Apicurio, Redpanda), when one is
//! configured: our schemas are registered under the topic name strategy (`<topic>-value`), the
//! producers frame records with the registry's ids, and the consumer decodes records whose
//! writer schema it fetches from the registry by id (cached). Without a registry the embedded
//! one (`schemas/avro/ids.json`) serves both sides.

use load_agent_avro::registry::records;
use load_agent_avro::registry_client::{RegistryClient, RegistryClientError};

use crate::config::{ACTION_DESTINATIONS, KafkaConfig, SchemaIds};

/// Registers (or finds) the newest `InboundEvent` under the events topic and `ActionCommand`
/// under every action topic, and returns the ids to produce with. The action topics must agree
/// on one id (a registry gives the same id to the same schema under several subjects).
pub async fn register_schemas(
    client: &RegistryClient,
    kafka: &KafkaConfig,
) -> Result<SchemaIds, RegistryError> {
    let inbound_event = client.register(&kafka.events_topic, records::INBOUND_EVENT).await?;
    let mut action_command = None;
    for d in ACTION_DESTINATIONS {
        let topic = kafka.actions_topic(d);
        let id = client.register(&topic, records::ACTION_COMMAND).await?;
        match action_command {
            None => action_command = Some(id),
            Some(first) if first != id => {
                return Err(RegistryError::Inconsistent { topic, first: first.0, this: id.0 });
            }
            Some(_) => {}
        }
    }
    let action_command = action_command.unwrap_or_else(|| SchemaIds::embedded().action_command);
    Ok(SchemaIds { inbound_event, action_command })
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Client(#[from] RegistryClientError),
    #[error("the registry gave ActionCommand id {this} under {topic} but {first} under another action topic")]
    Inconsistent { topic: String, first: u32, this: u32 },
}

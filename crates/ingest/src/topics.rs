//! The default names of the topics and of the load workers' consumer group (topics.md: every one
//! is configurable in the `[kafka]` section, settings.rs). Their one home: the Kafka crate
//! re-exports them.

/// The inbound topic.
pub const EVENTS_TOPIC: &str = "load-agent.events";
/// The dead-letter topic of the inbound topic.
pub const DLQ_TOPIC: &str = "load-agent.events.dlq";
/// Action topics are `<prefix>.<service>`.
pub const ACTIONS_TOPIC_PREFIX: &str = "load-agent.actions";
/// The consumer group of the load workers.
pub const GROUP_ID: &str = "load-agent";

//! Production mode: Kafka in and out, Postgres (built with the `kafka` feature): the pipeline's
//! loops wired from the Kafka crate's pieces (the consumer over the ingest crate's unit of work,
//! the relay to the action topics behind the send limit, the timer pump to the inbound topic),
//! and `load-agent topics ensure`.

use crate::commands::service::Role;
use crate::config::Settings;
use crate::error::CliError;

#[cfg(not(feature = "kafka"))]
pub async fn run(_settings: &Settings, role: Role) -> Result<(), CliError> {
    Err(CliError::bad_input(format!(
        "load-agent {role:?}: kafka.brokers is set (production mode) but this build has no Kafka support; \
         build with `cargo build --release -p load-agent --features kafka`"
    )))
}

#[cfg(feature = "kafka")]
pub async fn run(settings: &Settings, role: Role) -> Result<(), CliError> {
    imp::run(settings, role).await
}

#[cfg(feature = "kafka")]
pub use imp::Pipeline;

/// `load-agent topics ...`.
#[cfg(feature = "kafka")]
#[derive(Debug, clap::Subcommand)]
pub enum TopicsCommand {
    /// Creates the topics of the configuration (`kafka.events_topic`, `kafka.dlq_topic`, one
    /// `<kafka.actions_topic_prefix>.<service>` per delivery service) that do not exist yet;
    /// existing topics are left as they are. Prints every topic and whether it was created.
    Ensure {
        /// Partitions of a created topic (default `kafka.partitions`).
        #[arg(long)]
        partitions: Option<i32>,
        /// Replication factor of a created topic.
        #[arg(long, default_value_t = 1)]
        replication_factor: i32,
    },
}

/// Runs a `topics` command; exit 0 when every topic exists afterwards, 1 when the broker
/// refused, 2 on a configuration without brokers.
#[cfg(feature = "kafka")]
pub fn run_topics(settings: &Settings, cmd: TopicsCommand) -> Result<(), CliError> {
    use crate::error::OrExit;

    let TopicsCommand::Ensure { partitions, replication_factor } = cmd;
    if settings.kafka.brokers.is_empty() {
        return Err(CliError::bad_input(
            "load-agent topics ensure: kafka.brokers is empty (set LOAD_AGENT_KAFKA_BROKERS)",
        ));
    }
    let partitions = partitions.unwrap_or(settings.kafka.partitions);
    if partitions <= 0 || replication_factor <= 0 {
        return Err(CliError::bad_input(
            "load-agent topics ensure: --partitions and --replication-factor must be at least 1",
        ));
    }
    let kafka = settings.kafka_config();
    let topics = kafka.all_topics();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .or_fail("load-agent topics ensure: cannot start the runtime")?;
    let created = runtime
        .block_on(load_agent_kafka::ensure_topics(&kafka, &topics, partitions, replication_factor))
        .or_fail(format!("load-agent topics ensure: on {}", kafka.brokers))?;
    for topic in &topics {
        let what = if created.contains(topic) { "created" } else { "exists" };
        println!("{topic}\t{what}");
    }
    println!("{} topics on {}: {} created", topics.len(), kafka.brokers, created.len());
    Ok(())
}

#[cfg(feature = "kafka")]
mod imp {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use load_agent_ingest::record_processor;
    use load_agent_kafka::{
        ConsumerConfig, KafkaConfig, KafkaEventPublisher, consume, ensure_topics, relay_ends,
    };
    use load_agent_runtime::{
        Clock, ContactLimitedOutbox, EventPublisher, PumpConfig, Relay, RelayConfig, SendLimits, Shutdown,
        SystemClock, TimerPump, shutdown_channel,
    };
    use load_agent_store::{Outbox, Stores};
    use tokio::task::JoinSet;
    use tracing::{error, info};

    use crate::commands::service::{Role, ServiceParts, drain, start_http, wait_for_signal};
    use crate::commands::store_cmds::open;
    use crate::config::Settings;
    use crate::error::{CliError, OrExit};
    use crate::telemetry;

    /// The Kafka pipeline's loops, as `serve`, `worker`, `relay`, `timer-pump` and `loadtest`
    /// run them.
    pub struct Pipeline<'a> {
        pub settings: &'a Settings,
        pub stores: &'a Stores,
        pub kafka: &'a KafkaConfig,
        pub registry: Option<&'a Arc<load_agent_avro::registry_client::RegistryClient>>,
        pub parts: ServiceParts,
        pub clock: Arc<dyn Clock>,
    }

    impl Pipeline<'_> {
        /// Spawns the loops of `role` on `tasks`; they stop on `shutdown`.
        pub fn spawn(self, role: Role, tasks: &mut JoinSet<()>, shutdown: &Shutdown) -> Result<(), CliError> {
            let Pipeline { settings, stores, kafka, registry, parts, clock } = self;
            let ServiceParts { agent, llm, limits } = parts;
            let rc = settings.runtime();
            // With the worker in this process, its commits wake the relay (no poll wait).
            let mut commit_signal = None;
            if matches!(role, Role::All | Role::Worker) {
                let cache = rc.cache.unwrap_or_default();
                let (mut processor, _cache) =
                    record_processor(stores, agent, llm, clock.clone(), rc.worker, cache, rc.group_commit);
                if let Some(r) = registry {
                    processor = processor.with_registry(r.clone());
                }
                commit_signal = Some(processor.worker().commit_signal());
                let consumer = ConsumerConfig {
                    max_buffered_per_partition: settings.kafka.max_in_flight,
                    max_concurrent_runs: settings.worker.concurrency,
                    drain_timeout: Duration::from_secs(settings.shutdown.grace_secs.saturating_sub(5).max(1)),
                    ..ConsumerConfig::default()
                };
                let (k, s, kept) = (kafka.clone(), shutdown.clone(), stores.dead_letters.clone());
                tasks.spawn(async move {
                    match consume(&k, consumer, processor, kept, s).await {
                        Ok(report) => info!(?report, "consumer stopped"),
                        Err(e) => error!(error = %e, "consumer failed"),
                    }
                });
            }
            if matches!(role, Role::All | Role::Relay) {
                let mut relay = kafka_relay(stores, kafka, &limits, clock.clone(), rc.relay)?;
                if let Some(signal) = commit_signal.take() {
                    relay = relay.with_wakeup(signal);
                }
                tasks.spawn(Arc::new(relay).run(shutdown.clone()));
            }
            if matches!(role, Role::All | Role::TimerPump) {
                let pump = kafka_timer_pump(stores, kafka, clock, rc.pump)?;
                tasks.spawn(Arc::new(pump).run(shutdown.clone()));
            }
            Ok(())
        }
    }

    /// The relay on Kafka: due rows pass the per-contact send limit, go to
    /// `load-agent.actions.<service>` with the contact's addresses (read from the load's
    /// snapshot), and their outcomes go to the inbound topic. Run it with
    /// `Arc::new(relay).run(shutdown)`. A producer that cannot be created fails the command.
    fn kafka_relay(
        stores: &Stores,
        kafka: &KafkaConfig,
        limits: &SendLimits,
        clock: Arc<dyn Clock>,
        config: RelayConfig,
    ) -> Result<Relay, CliError> {
        let fail = "load-agent: relay producer";
        let ends = relay_ends(stores.events.clone(), kafka).or_fail(fail)?;
        let outbox: Arc<dyn Outbox> =
            Arc::new(ContactLimitedOutbox::new(stores.outbox.clone(), limits, clock.clone()));
        Ok(Relay::new(outbox, stores.timers.clone(), ends.destinations, ends.outcomes, clock)
            .with_config(config))
    }

    /// The timer pump on Kafka: `timer_fired` events go to the inbound topic. Run it with
    /// `Arc::new(pump).run(shutdown)`. A producer that cannot be created fails the command.
    fn kafka_timer_pump(
        stores: &Stores,
        kafka: &KafkaConfig,
        clock: Arc<dyn Clock>,
        config: PumpConfig,
    ) -> Result<TimerPump, CliError> {
        let publisher: Arc<dyn EventPublisher> = Arc::new(
            KafkaEventPublisher::new(kafka, "load-agent-timer-pump")
                .or_fail("load-agent: timer pump producer")?,
        );
        Ok(TimerPump::new(stores.timers.clone(), publisher, clock).with_config(config))
    }

    pub async fn run(settings: &Settings, role: Role) -> Result<(), CliError> {
        let metrics = telemetry::init_metrics().or_fail("load-agent")?;
        let stores = open(settings).await?;
        let mut kafka = settings.kafka_config();
        // A Confluent-compatible registry, when configured, gives the schema ids; otherwise the
        // embedded registry's fixed ids frame every record.
        let registry = if settings.kafka.schema_registry_url.is_empty() {
            None
        } else {
            let client =
                load_agent_avro::registry_client::RegistryClient::new(&settings.kafka.schema_registry_url)
                    .or_bad_input("load-agent: kafka.schema_registry_url")?;
            kafka.schema_ids = load_agent_kafka::register_schemas(&client, &kafka).await.or_fail(format!(
                "load-agent: registering schemas at {}",
                settings.kafka.schema_registry_url
            ))?;
            Some(Arc::new(client))
        };
        if settings.kafka.create_topics {
            ensure_topics(&kafka, &kafka.all_topics(), settings.kafka.partitions, 1)
                .await
                .or_fail(format!("load-agent: creating topics on {}", kafka.brokers))?;
        }
        let parts = ServiceParts::build(settings)?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let (trigger, shutdown) = shutdown_channel();
        let mut tasks = tokio::task::JoinSet::new();
        let pipeline =
            Pipeline { settings, stores: &stores, kafka: &kafka, registry: registry.as_ref(), parts, clock };
        pipeline.spawn(role, &mut tasks, &shutdown)?;
        crate::commands::retention::spawn_store_jobs(&mut tasks, &stores, settings, &shutdown);
        let http = start_http(settings, stores, metrics, None, &shutdown, "load-agent").await?;
        info!(?role, brokers = %kafka.brokers, database = %settings.database.url.masked(), "load-agent serving (production mode)");
        // Every loop runs until shutdown: one that ends before (the consumer refused a topic's
        // settings at start, say) stops the process rather than leave it half running.
        let mut failed = false;
        tokio::select! {
            () = wait_for_signal() => {}
            Some(_) = tasks.join_next() => {
                error!("a loop of the service stopped by itself (see the error above): shutting down");
                failed = true;
            }
        }
        http.ready.store(false, Ordering::Relaxed);
        info!("shutting down: draining in-flight records, storing offsets, releasing claims");
        trigger.shutdown();
        drain(settings, tasks, http.server).await?;
        // The loop's failure is in the log already.
        if failed { Err(CliError::reported()) } else { Ok(()) }
    }
}

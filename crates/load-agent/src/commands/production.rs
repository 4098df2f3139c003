//! Production mode (Kafka in and out, Postgres), wired when the binary is built with Kafka.

use crate::commands::serve::Role;
use crate::config::Settings;

pub async fn run(_settings: &Settings, role: Role) -> u8 {
    eprintln!("load-agent {role:?}: production mode (kafka.brokers) is not available in this build");
    2
}

#!/usr/bin/env bash
# The dependency rules of docs/architecture.md ("What each crate owns and must never know"),
# checked on the crates' normal dependency trees (`cargo tree -e normal`: what a build of the
# crate links, not its tests or build scripts). Every rule the table states that a dependency
# tree can show is here; a failure names the crate, the rule and the offending dependency with
# the path that brings it in. Exits 1 when any rule is broken.
#
# Each rule is checked with the crate's default features and again with all its features, so a
# feature cannot bring in what the crate must never know; `avro` and the binary's embedded default
# (without the `kafka` feature) are the exceptions, see below.
set -euo pipefail
cd "$(dirname "$0")/.."

failures=0

# The package names of `crate`'s normal dependency tree (`tree`) or of its direct dependencies
# only (`direct`), for one feature set (`default` or `all`).
deps_of() {
  local crate=$1 scope=$2 features=$3
  local args=(-p "$crate" -e normal --prefix none --locked)
  [ "$scope" = direct ] && args+=(--depth 1)
  [ "$features" = all ] && args+=(--all-features)
  # The first line is the crate itself.
  cargo tree "${args[@]}" | tail -n +2 | awk '{print $1}' | sort -u
}

# forbid CRATE SCOPE FEATURES RULE DEP...: none of DEP may be in CRATE's tree (SCOPE `tree`) or
# among its direct dependencies (SCOPE `direct`). FEATURES: `both`, or `default` alone.
forbid() {
  local crate=$1 scope=$2 features=$3 rule=$4
  shift 4
  local sets=(default all)
  [ "$features" = default ] && sets=(default)
  local set found dep
  for set in "${sets[@]}"; do
    found=$(deps_of "$crate" "$scope" "$set")
    for dep in "$@"; do
      if grep -qx -- "$dep" <<<"$found"; then
        local what="depends on"
        [ "$scope" = direct ] && what="depends directly on"
        echo "deps-check: $crate $what $dep ($set features), which breaks its rule: $rule" >&2
        local flags=()
        [ "$set" = all ] && flags+=(--all-features)
        # How it comes in: the inverted tree from the offending package up to the crate.
        cargo tree -p "$crate" -e normal --locked "${flags[@]}" -i "$dep" 2>/dev/null | head -12 | sed 's/^/    /' >&2
        failures=$((failures + 1))
      fi
    done
  done
}

io="tokio sqlx sqlx-core rdkafka rdkafka-sys apache-avro reqwest hyper schema_registry_converter"

# shellcheck disable=SC2086 # the lists are meant to split into words
{
  forbid load-agent-domain tree both \
    "domain knows no tokio, SQL, Kafka, Avro, HTTP or LLM vendor; it performs no IO" \
    $io load-agent-llm-openai

  forbid load-agent-triage tree both \
    "triage knows nothing of the log, the store or the pipeline" \
    sqlx sqlx-core load-agent-store load-agent-agent load-agent-runtime load-agent-ingest load-agent-kafka \
    load-agent-llm

  forbid load-agent-llm tree both \
    "llm knows no HTTP or vendor (those are llm-openai), no store, no log" \
    reqwest hyper load-agent-llm-openai sqlx sqlx-core load-agent-store

  forbid load-agent-llm-openai tree both \
    "llm-openai knows nothing of the pipeline's decisions" \
    load-agent-agent load-agent-runtime load-agent-store load-agent-ingest load-agent-kafka

  # tokio comes in through the LLM trait's crate (its retries and deadline), which the agent
  # calls but never runs: the agent itself may not use it.
  forbid load-agent-agent tree both \
    "agent knows no database, queue, Kafka, Avro or LLM vendor; it performs no side effect" \
    sqlx sqlx-core rdkafka rdkafka-sys apache-avro reqwest hyper schema_registry_converter \
    load-agent-avro load-agent-store load-agent-runtime load-agent-ingest load-agent-kafka \
    load-agent-llm-openai
  forbid load-agent-agent direct both \
    "agent performs no side effect (no async runtime of its own)" \
    tokio

  # Only with its default features: `registry-client` (the HTTP client of a schema registry, for
  # the kafka crate and the binary) is the opt-in IO of the crate, off by default.
  forbid load-agent-avro tree default \
    "avro does no IO: encoding and decoding are sync functions over bytes" \
    tokio sqlx sqlx-core rdkafka rdkafka-sys reqwest hyper schema_registry_converter

  forbid load-agent-store tree both \
    "store never decides: it knows no agent, triage or LLM (nor the runtime or Kafka above it)" \
    load-agent-agent load-agent-triage load-agent-llm load-agent-llm-openai load-agent-runtime \
    load-agent-ingest load-agent-kafka rdkafka rdkafka-sys

  forbid load-agent-runtime tree both \
    "runtime knows no Kafka specifics (behind the queue and destination traits)" \
    rdkafka rdkafka-sys load-agent-kafka schema_registry_converter
  forbid load-agent-runtime direct both \
    "runtime knows no SQL (it goes through the store traits)" \
    sqlx sqlx-core

  # The registry feature (its schema registry client) may bring HTTP; never a Kafka client.
  forbid load-agent-ingest tree both \
    "ingest knows no Kafka client (the embedded default builds on it without Kafka)" \
    rdkafka rdkafka-sys load-agent-kafka
  forbid load-agent-ingest direct both \
    "ingest knows no SQL (it goes through the store traits)" \
    sqlx sqlx-core

  forbid load-agent-kafka direct both \
    "kafka knows no SQL (it goes through the store traits)" \
    sqlx sqlx-core

  # Only with its default features: `kafka` (production mode) is the opt-in that links it.
  forbid load-agent tree default \
    "the embedded default build links no Kafka client (production mode is the kafka feature)" \
    rdkafka rdkafka-sys load-agent-kafka

  forbid load-agent-archive direct both \
    "archive knows no SQL (it goes through EventStore/LoadIndex)" \
    sqlx sqlx-core
  forbid load-agent-archive tree both \
    "archive knows nothing of what a decision means" \
    load-agent-agent load-agent-llm load-agent-runtime load-agent-kafka
}

# No production crate links the test kit: it is a dev-dependency only (the benches, which are
# not shipped, may use it as a normal one). Holds trivially while the kit does not exist.
for manifest in crates/*/Cargo.toml; do
  crate=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -1)
  case "$crate" in load-agent-testkit | "") continue ;; esac
  forbid "$crate" tree both "a production crate never depends on the test-only load-agent-testkit" \
    load-agent-testkit
done

if [ "$failures" -gt 0 ]; then
  echo "deps-check: $failures dependency rule(s) of docs/architecture.md broken" >&2
  exit 1
fi
echo "deps-check: every dependency rule of docs/architecture.md holds"

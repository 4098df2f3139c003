#!/usr/bin/env bash
# Runs every test of load-agent on a fresh machine: installs what the build needs, starts the
# services the tests use (PostgreSQL; a Kafka-protocol broker), then runs the checks.
# Fails, never skips, when a service cannot be started.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n==> %s\n' "$*"; }

# --- build prerequisites (rdkafka builds its bundled librdkafka with cmake) -----------------
need_pkgs=()
command -v cmake >/dev/null 2>&1 || need_pkgs+=(cmake)
command -v pkg-config >/dev/null 2>&1 || need_pkgs+=(pkg-config)
dpkg -s libcurl4-openssl-dev >/dev/null 2>&1 || need_pkgs+=(libcurl4-openssl-dev)
dpkg -s libssl-dev >/dev/null 2>&1 || need_pkgs+=(libssl-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need_pkgs+=(zlib1g-dev)
dpkg -s libzstd-dev >/dev/null 2>&1 || need_pkgs+=(libzstd-dev)
dpkg -s libsasl2-dev >/dev/null 2>&1 || need_pkgs+=(libsasl2-dev)
# Headless Chromium for the console's browser test (crates/load-agent/tests/console_browser.rs).
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
export CHROMIUM_BIN=${CHROMIUM_BIN:-$(command -v chromium)}

# --- PostgreSQL ------------------------------------------------------------------------------
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  log "starting PostgreSQL"
  if [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432: the tests need it" >&2; exit 1; }

# --- the dependency rules of docs/architecture.md (domain pure, agent without IO, ...) ------
log "checking the crates' dependency rules (scripts/deps-check.sh)"
./scripts/deps-check.sh
log "checking that no two modules of a crate import each other (scripts/module-cycles.sh)"
./scripts/module-cycles.sh

# --- deployment files, checked statically ----------------------------------------------------
log "checking deploy/, docker-compose.kafka.yml and the Dockerfile"
./scripts/check-deploy.sh

# --- Kafka-protocol broker (Nisshi, ../shared/guides/kafka-broker.md) -----------------------
if [ -z "${KAFKA_BROKERS:-}" ]; then
  log "starting the test Kafka broker"
  kafka_port=$("$root/scripts/kafka-broker.sh" start)
  trap '"$root/scripts/kafka-broker.sh" stop' EXIT
  export KAFKA_BROKERS="127.0.0.1:$kafka_port"
fi
echo "KAFKA_BROKERS=$KAFKA_BROKERS"

# --- tests -----------------------------------------------------------------------------------
log "cargo test"
cargo test --workspace --all-features --locked

log "outages: Postgres restarted, then a broker restarted, during traffic (one at a time)"
export NISSHI_BIN="$root/target/tools/nisshi/bin/nisshi"
cargo test -p load-agent --all-features --locked --test outage -- --ignored --test-threads=1

log "scenario evals through the CLI: SQLite, then Postgres"
cargo run -q --locked --all-features -p load-agent -- eval --report target/eval-sqlite.json
cargo run -q --locked --all-features -p load-agent -- eval --database-url "$DATABASE_URL" --report target/eval-postgres.json

log "recorded dumps replay to their golden decisions"
for golden in evals/dumps/*.golden.jsonl; do
  cargo run -q --locked --all-features -p load-agent -- replay "${golden%.golden.jsonl}.jsonl" --golden "$golden"
done

log "benches/compare-postgres-es (a workspace of its own, outside the one above) still builds"
cargo check --locked --quiet --manifest-path benches/compare-postgres-es/Cargo.toml --target-dir target/compare-postgres-es

log "all tests passed"

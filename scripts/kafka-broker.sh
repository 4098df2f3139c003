#!/usr/bin/env bash
# Starts and stops the Kafka-protocol broker the integration tests use: Nisshi 0.8.1 with memory
# storage on 127.0.0.1 and a free port (../shared/guides/kafka-broker.md).
#
#   scripts/kafka-broker.sh start   # prints the port on stdout once the broker accepts connections
#   scripts/kafka-broker.sh stop    # stops the broker this script started (by its process id)
#
# KAFKA_BROKER_NAME=NAME runs a separate instance (its own pid and log file), so a test or a
# developer can run a broker beside the test suite's.
#
# KAFKA_BROKER_STORAGE picks Nisshi's storage engine: `memory` (the default, what the test suite
# uses) or `sqlite` (a SQLite file target/tools/NAME.db, WAL, emptied at each start). The memory
# engine lists every stored batch of a partition at every fetch, so a fetch costs in proportion
# to what the partition holds and a long load test slows the broker down as its topics grow;
# the SQLite engine reads from the requested offset through an index, as Kafka's offset index
# does. The load tests of docs/capacity.md use `sqlite` ("The test broker's storage engine").
#
# With KAFKA_BROKERS already set (a real Kafka, for example), `start` starts nothing and prints
# the port of its first broker, and `stop` does nothing.
#
# The binary: `gunzip` of ../shared/tools/nisshi/nisshi-0.8.1-x86_64-linux-gnu.gz (beside the
# repository, as on CI), else `cargo install nisshi --version 0.8.1 --locked` (slow: ~30 min).
# Everything goes to target/tools/; messages go to stderr, only the port to stdout.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tools="$repo/target/tools"
bin="$tools/nisshi/bin/nisshi"
name=${KAFKA_BROKER_NAME:-nisshi}
pidfile="$tools/$name.pid"
logfile="$tools/$name.log"
shared_gz="$repo/../shared/tools/nisshi/nisshi-0.8.1-x86_64-linux-gnu.gz"
sha256=cee1b515391c0f05b9bc552b40a8d5f6614940b1de0f828fde673a2fc45448f8

say() { printf 'kafka-broker: %s\n' "$*" >&2; }

install_nisshi() {
  [ -x "$bin" ] && return 0
  mkdir -p "$tools/nisshi/bin"
  if [ -f "$shared_gz" ]; then
    if command -v sha256sum >/dev/null 2>&1; then
      echo "$sha256  $shared_gz" | sha256sum -c --quiet - >&2 || { say "checksum mismatch: $shared_gz"; exit 1; }
    fi
    say "unpacking $shared_gz"
    gunzip -c "$shared_gz" >"$bin.tmp"
    chmod +x "$bin.tmp"
    mv "$bin.tmp" "$bin"
  else
    say "$shared_gz not found: building nisshi 0.8.1 from crates.io (about 30 minutes on 2 cores)"
    cargo install nisshi --version 0.8.1 --locked --ignore-rust-version --root "$tools/nisshi" >&2
  fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  if [ -n "${KAFKA_BROKERS:-}" ]; then
    say "KAFKA_BROKERS is set ($KAFKA_BROKERS): starting nothing"
    first=${KAFKA_BROKERS%%,*}
    echo "${first##*:}"
    return 0
  fi
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    say "a broker started by this script is already running (pid $(cat "$pidfile")); stop it first"
    exit 1
  fi
  install_nisshi
  case "${KAFKA_BROKER_STORAGE:-memory}" in
    memory) storage=memory://nisshi/ ;;
    sqlite)
      rm -f "$tools/$name.db" "$tools/$name.db-wal" "$tools/$name.db-shm"
      storage="sqlite://$name.db"
      ;;
    *) say "KAFKA_BROKER_STORAGE must be memory or sqlite, not '$KAFKA_BROKER_STORAGE'"; exit 2 ;;
  esac
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    port_in_use "$port" && continue
    # From target/tools: a sqlite:// file is named relative to the working directory.
    (cd "$tools" && exec "$bin" broker \
      --listener-url "tcp://127.0.0.1:$port" \
      --advertised-listener-url "tcp://127.0.0.1:$port" \
      --storage-engine "$storage" \
      --group-initial-rebalance-delay 100ms) \
      >"$logfile" 2>&1 &
    pid=$!
    echo "$pid" >"$pidfile"
    for _ in $(seq 1 100); do
      if ! kill -0 "$pid" 2>/dev/null; then
        break # exited (the port was taken meanwhile?): try another one
      fi
      if port_in_use "$port"; then
        say "nisshi is ready on 127.0.0.1:$port (pid $pid, log $logfile)"
        echo "$port"
        return 0
      fi
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    rm -f "$pidfile"
    say "nisshi did not start on port $port; last log lines:"
    tail -n 5 "$logfile" >&2 || true
  done
  say "could not start nisshi"
  exit 1
}

stop() {
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    say "stopped nisshi (pid $pid)"
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The chaos soak (issue 19, item 4; docs/reliability.md "Chaos soak"). Not part of .ci/run or
# scripts/test.sh: it takes about half an hour and restarts a Postgres cluster of its own.
#
#   scripts/soak/run.sh --minutes 10 --rate 400 --loads 4000 --quiet-loads 300 --tail-minutes 10
#       # the run in docs/reliability.md (about 30 minutes; those are also the defaults)
#   scripts/soak/run.sh --minutes 2 --tail-minutes 1 --loads 500 --quiet-loads 0   # a trial
#
# Every option goes to scripts/soak/driver.py (`--help` lists them). What this script prepares:
# - a venv in target/soak-venv with kafka-python, fastavro and psycopg (PyPI);
# - the release binary: cargo build --release --locked -p load-agent --features kafka
#   (CARGO_TARGET_DIR is honoured; the driver is given the binary's path);
# - the Nisshi broker binary in target/tools/nisshi/bin (as scripts/kafka-broker.sh does);
# - a private PostgreSQL cluster `15 soak` on port 5433 (trust auth on loopback), created if
#   missing and started; it is stopped again at the end. The shared cluster on 5432 is never
#   touched. SOAK_PG_VERSION, SOAK_PG_CLUSTER, SOAK_PG_PORT change it.
# Results: target/soak/<run>/ (target/soak/latest), the audit's verdict as the exit code.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
venv="$repo/target/soak-venv"
pg_version=${SOAK_PG_VERSION:-15}
pg_cluster=${SOAK_PG_CLUSTER:-soak}
pg_port=${SOAK_PG_PORT:-5433}
nisshi="$repo/target/tools/nisshi/bin/nisshi"
nisshi_gz="$repo/../shared/tools/nisshi/nisshi-0.8.1-x86_64-linux-gnu.gz"

say() { printf 'soak: %s\n' "$*" >&2; }

if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q kafka-python==3.0.12 fastavro==1.13.1 'psycopg[binary]==3.3.9'
fi

say "building the release binary"
cargo build --release --locked -p load-agent --features kafka --manifest-path "$repo/Cargo.toml" >&2

if [ ! -x "$nisshi" ]; then
  if [ -f "$nisshi_gz" ]; then
    mkdir -p "$(dirname "$nisshi")"
    gunzip -c "$nisshi_gz" >"$nisshi.tmp"
    chmod +x "$nisshi.tmp"
    mv "$nisshi.tmp" "$nisshi"
  else
    say "no Nisshi binary: run scripts/kafka-broker.sh start once (it builds one), or pass --nisshi"
    exit 1
  fi
fi

if ! pg_lsclusters -h | awk '{print $1"/"$2}' | grep -qx "$pg_version/$pg_cluster"; then
  say "creating the private cluster $pg_version/$pg_cluster on port $pg_port"
  pg_createcluster "$pg_version" "$pg_cluster" --port "$pg_port" -- --auth=trust >&2
fi
pg_ctlcluster --skip-systemctl-redirect "$pg_version" "$pg_cluster" start 2>/dev/null || true
# shellcheck disable=SC2329 # called by the EXIT trap
stop_pg() { pg_ctlcluster --skip-systemctl-redirect "$pg_version" "$pg_cluster" stop 2>/dev/null || true; }
trap stop_pg EXIT

rc=0
"$venv/bin/python" "$repo/scripts/soak/driver.py" \
  --bin "$target/release/load-agent" --nisshi "$nisshi" \
  --pg-version "$pg_version" --pg-cluster "$pg_cluster" --pg-port "$pg_port" "$@" || rc=$?
exit "$rc"

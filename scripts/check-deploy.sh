#!/usr/bin/env bash
# Checks the deployment files statically (there is no Docker engine or cluster in CI):
# the Kubernetes manifests against the Kubernetes JSON schemas (kubernetes-validate, strict),
# docker-compose.kafka.yml against the Compose specification (compose-spec), and the Dockerfile
# for the instructions it must have, the Prometheus alert rules (promtool check and unit tests)
# and the Grafana dashboard (JSON, every panel's query parses).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/tools/deploy-check
if [ ! -x "$venv/bin/kubernetes-validate" ] || ! "$venv/bin/python" -c "import compose_spec" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'kubernetes-validate==1.37.0' 'compose-spec==0.2.1' 'pyyaml>=6'
fi
echo "kubernetes manifests:"
"$venv/bin/kubernetes-validate" --strict --quiet deploy/k8s/*.yaml
echo "  ok ($(ls deploy/k8s/*.yaml | wc -l) files)"
echo "docker-compose.kafka.yml:"
"$venv/bin/python" - <<'PY'
import sys, yaml, compose_spec
text = open("docker-compose.kafka.yml").read()
doc = yaml.safe_load(text)
compose = compose_spec.PyCompose.from_yaml(text)
compose.validate()
want = {"kafka", "schema-registry", "postgres", "load-agent"}
missing = want - set(compose.service_names())
if missing:
    sys.exit(f"docker-compose.kafka.yml: missing services {sorted(missing)}")
env = doc["services"]["load-agent"]["environment"]
for key in ("LOAD_AGENT_DATABASE_URL", "LOAD_AGENT_KAFKA_BROKERS"):
    if key not in env:
        sys.exit(f"docker-compose.kafka.yml: services.load-agent.environment.{key} is missing")
print(f"  ok ({len(compose.service_names())} services)")
PY
echo "Dockerfile:"
for needle in "^FROM rust:1.95" "cargo build --release --locked -p load-agent --features kafka" "^USER 10001" "^ENTRYPOINT"; do
  grep -qE "$needle" Dockerfile || { echo "Dockerfile: expected a line matching '$needle'" >&2; exit 1; }
done
echo "  ok"
echo "prometheus alert rules:"
if ! command -v promtool >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool check rules deploy/prometheus/alerts.yml
(cd deploy/prometheus && promtool test rules alerts.test.yml)
echo "grafana dashboard:"
rules=$(mktemp --suffix .yml)
"$venv/bin/python" - "$rules" <<'PY'
import json, sys, yaml
dash = json.load(open("deploy/grafana/load-agent.json"))
rules = []
for panel in dash["panels"]:
    targets = panel.get("targets") or sys.exit(f"panel {panel.get('title')!r} has no query")
    for t in targets:
        rules.append({"record": f"dashboard:panel{panel['id']}:{t['refId']}", "expr": t["expr"]})
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[1], "w"))
print(f"  {len(dash['panels'])} panels, {len(rules)} queries")
PY
promtool check rules "$rules" >/dev/null && rm -f "$rules" && echo "  ok (every query parses)"

#!/usr/bin/env python3
"""Chaos soak driver (issue 19, item 4). Run it through scripts/soak/run.sh, which prepares the
venv, the release binary, the broker binary and the private Postgres cluster.

What it does, in order, all bounded in time:

1. a fresh database `soak` on the private Postgres cluster (port 5433 by default), migrated;
2. a private Nisshi broker with durable SQLite storage on a free port; `load-agent topics
   ensure --partitions 6`;
3. the roles as separate processes: `worker` x2, `relay`, `timer-pump` (release binary);
4. registrations for `--loads` loads, then `--minutes` of mixed traffic at `--rate` events/s,
   then `--tail-minutes` of light traffic (`--tail-rate`) so that timers set in the first
   minutes come due while the chaos goes on;
5. meanwhile, every 20-60 s (random), SIGKILL of one random role, restarted after 1-5 s; one
   restart of the Postgres cluster and one of the broker (SIGKILL, restarted on the same port
   and storage) during the traffic; a role that exits by itself is restarted and noted;
6. drain: no more kills; wait (at most `--drain-minutes`) until the consumer group has
   committed the whole events topic, no outbox row is pending and no timer is overdue, for
   20 s; then SIGTERM every role;
7. the audit (scripts/soak/audit.py, a separate process reading only the topics and the
   database), then the broker is stopped.

Everything lands in target/soak/<run>/: events.tsv (every produced event id the broker
acknowledged), chaos.jsonl (kills, restarts, exits), loadavg.tsv, ps.txt, logs/, run.json,
audit.json.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import psycopg
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

import traffic

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

EVENTS_TOPIC = "load-agent.events"
GROUP = "load-agent"


def utc():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Journal:
    """chaos.jsonl: one line per kill, restart, exit, phase."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()
        self.t0 = time.monotonic()

    def log(self, what, **kw):
        entry = {"t": utc(), "s": round(time.monotonic() - self.t0, 1), "what": what, **kw}
        with self.lock:
            self.f.write(json.dumps(entry) + "\n")
        print(f"[soak {entry['s']:7.1f}s] {what} {json.dumps(kw) if kw else ''}", flush=True)


class Proc:
    """One child process started by the driver, stopped only by its pid."""

    def __init__(self, name, argv, env, log_path, cwd=None):
        self.name, self.argv, self.env, self.log_path, self.cwd = name, argv, env, log_path, cwd
        self.p = None
        self.starts = 0
        self.expected_down = False

    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"\n===== start {utc()} =====\n".encode())
        log.flush()
        self.p = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                  cwd=self.cwd, start_new_session=True)
        log.close()
        self.starts += 1
        self.expected_down = False

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def kill9(self):
        self.expected_down = True
        if self.alive():
            os.kill(self.p.pid, signal.SIGKILL)
        if self.p is not None:
            self.p.wait()

    def term(self, grace=30):
        self.expected_down = True
        if not self.alive():
            return self.p.returncode if self.p else None
        os.kill(self.p.pid, signal.SIGTERM)
        try:
            return self.p.wait(grace)
        except subprocess.TimeoutExpired:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait()
            return "killed after grace"


class Soak:
    def __init__(self, a):
        self.a = a
        self.dir = a.out
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        self.j = Journal(os.path.join(self.dir, "chaos.jsonl"))
        self.stop_chaos = threading.Event()
        self.done = threading.Event()
        self.lock = threading.Lock()  # role start/stop
        self.broker_port = free_port()
        self.brokers = f"127.0.0.1:{self.broker_port}"
        self.db_url = f"postgres://postgres@127.0.0.1:{a.pg_port}/{a.db}"
        self.kills = []
        self.exits = []
        self.outages = []
        self.produced = 0
        self.failed_sends = 0
        self.resends = 0
        self.rates = []
        self.events_f = open(os.path.join(self.dir, "events.tsv"), "a", buffering=1 << 16)
        self.events_lock = threading.Lock()
        self.retry = []
        self.roles = {}
        self.broker = None

    # ---------------------------------------------------------------- infrastructure
    def database(self):
        admin = f"postgres://postgres@127.0.0.1:{self.a.pg_port}/postgres"
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {self.a.db} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {self.a.db}")
        env = self.role_env(free_port())
        r = subprocess.run([self.a.bin, "migrate"], env=env, capture_output=True, text=True)
        self.j.log("migrate", rc=r.returncode, out=(r.stdout + r.stderr)[-300:])
        if r.returncode != 0:
            raise SystemExit("migrate failed")

    def start_broker(self):
        bdir = os.path.join(self.dir, "broker")
        os.makedirs(bdir, exist_ok=True)
        url = f"tcp://127.0.0.1:{self.broker_port}"
        if self.broker is None:
            self.broker = Proc("broker", [self.a.nisshi, "broker", "--listener-url", url,
                                          "--advertised-listener-url", url,
                                          "--storage-engine", "sqlite://broker.db",
                                          "--group-initial-rebalance-delay", "100ms"],
                               dict(os.environ), os.path.join(self.dir, "logs", "broker.log"), cwd=bdir)
        self.broker.start()
        deadline = time.time() + 30
        while not port_open(self.broker_port):
            if time.time() > deadline or not self.broker.alive():
                raise SystemExit("the broker did not start")
            time.sleep(0.05)

    def role_env(self, http_port):
        env = dict(os.environ)
        env.update({
            "LOAD_AGENT_KAFKA_BROKERS": self.brokers,
            "LOAD_AGENT_DATABASE_URL": self.db_url,
            "LOAD_AGENT_KAFKA_PARTITIONS": "6",
            # A SIGKILLed worker's partitions move to the other one after 10 s, not 45.
            "LOAD_AGENT_KAFKA_SESSION_TIMEOUT_MS": "10000",
            "LOAD_AGENT_KAFKA_HEARTBEAT_INTERVAL_MS": "2000",
            # A killed relay's claims are taken over after 30 s, not 90.
            "LOAD_AGENT_RELAY_LEASE_SECS": "30",
            # The synthetic traffic packs days of one load's messages into minutes.
            "LOAD_AGENT_RELAY_SEND_LIMITS": "sms=1000/1h",
            "LOAD_AGENT_DATABASE_MAX_CONNECTIONS": "12",
            "LOAD_AGENT_HTTP_ADDR": f"127.0.0.1:{http_port}",
            "LOAD_AGENT_LOG_LEVEL": "info",
        })
        env.pop("LOAD_AGENT_CRASH_AT", None)
        return env

    def topics(self):
        r = subprocess.run([self.a.bin, "topics", "ensure", "--partitions", "6"],
                           env=self.role_env(free_port()), capture_output=True, text=True)
        self.j.log("topics ensure", rc=r.returncode, out=r.stdout.strip().replace("\n", "; "))
        if r.returncode != 0:
            raise SystemExit(f"topics ensure failed: {r.stderr[-500:]}")

    def start_roles(self):
        for name, role in [("worker-1", "worker"), ("worker-2", "worker"), ("relay", "relay"),
                           ("timer-pump", "timer-pump")]:
            p = Proc(name, [self.a.bin, role], self.role_env(free_port()),
                     os.path.join(self.dir, "logs", f"{name}.log"))
            p.start()
            self.roles[name] = p
            self.j.log("start", role=name, pid=p.p.pid)

    # ---------------------------------------------------------------- chaos
    def sleep(self, secs):
        return self.stop_chaos.wait(secs)

    def chaos(self):
        rng = random.Random(self.a.seed)
        while not self.sleep(rng.uniform(self.a.kill_min, self.a.kill_max)):
            name = rng.choice(sorted(self.roles))
            with self.lock:
                p = self.roles[name]
                pid = p.p.pid
                p.kill9()
            self.kills.append({"t": utc(), "role": name, "pid": pid})
            self.j.log("SIGKILL", role=name, pid=pid)
            time.sleep(rng.uniform(1, 5))
            with self.lock:
                p.start()
            self.j.log("restart", role=name, pid=p.p.pid)

    def outage_plan(self, traffic_start, traffic_secs):
        def at(frac):
            left = traffic_start + frac * traffic_secs - time.monotonic()
            return self.sleep(max(0, left))

        if not at(self.a.pg_restart_at):
            t = time.monotonic()
            r = subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", self.a.pg_version,
                                self.a.pg_cluster, "restart"], capture_output=True, text=True)
            took = round(time.monotonic() - t, 2)
            self.outages.append({"t": utc(), "what": "postgres restart", "rc": r.returncode, "secs": took})
            self.j.log("postgres restarted", rc=r.returncode, secs=took, err=r.stderr[-200:])
        if not at(self.a.broker_restart_at):
            t = time.monotonic()
            self.broker.kill9()
            self.j.log("broker SIGKILL", pid=self.broker.p.pid)
            time.sleep(self.a.broker_down_secs)
            self.broker.start()
            deadline = time.time() + 30
            while not port_open(self.broker_port) and time.time() < deadline:
                time.sleep(0.05)
            took = round(time.monotonic() - t, 2)
            self.outages.append({"t": utc(), "what": "broker SIGKILL + restart", "secs_down": took})
            self.j.log("broker restarted", pid=self.broker.p.pid, secs_down=took)

    def watch(self):
        """Restarts a role (or the broker) that exited by itself and notes it; samples load."""
        lf = open(os.path.join(self.dir, "loadavg.tsv"), "a", buffering=1)
        last_ps = 0
        while not self.done.wait(1):
            with self.lock:
                for name, p in self.roles.items():
                    if not p.expected_down and not p.alive():
                        code = p.p.returncode
                        with open(p.log_path, "rb") as f:
                            f.seek(max(0, os.path.getsize(p.log_path) - 1500))
                            tail = f.read().decode(errors="replace")
                        self.exits.append({"t": utc(), "role": name, "code": code, "log_tail": tail[-800:]})
                        self.j.log("EXITED BY ITSELF, restarting", role=name, code=code)
                        p.start()
            if self.broker is not None and not self.broker.expected_down and not self.broker.alive():
                self.exits.append({"t": utc(), "role": "broker", "code": self.broker.p.returncode})
                self.j.log("BROKER EXITED BY ITSELF, restarting", code=self.broker.p.returncode)
                self.broker.start()
            with open("/proc/loadavg") as f:
                la = f.read().split()
            if int(time.time()) % 10 == 0:
                lf.write(f"{utc()}\t{la[0]}\t{la[1]}\t{la[2]}\n")
            if time.time() - last_ps > 60:
                last_ps = time.time()
                ps = subprocess.run(["ps", "-eo", "pid,pcpu,rss,etimes,args", "--sort=-pcpu"],
                                    capture_output=True, text=True).stdout.splitlines()[:15]
                with open(os.path.join(self.dir, "ps.txt"), "a") as f:
                    f.write(f"--- {utc()}\n" + "\n".join(line[:200] for line in ps) + "\n")

    # ---------------------------------------------------------------- traffic
    def producer(self):
        return KafkaProducer(bootstrap_servers=self.brokers, acks="all", linger_ms=5,
                             retries=1_000_000, delivery_timeout_ms=600_000, request_timeout_ms=30_000,
                             max_in_flight_requests_per_connection=1, retry_backoff_ms=200,
                             reconnect_backoff_max_ms=2000)

    def send(self, prod, ev, resend=False):
        kind = ev["payload"][0].split(".")[-1]
        value = traffic.encode(ev)

        def ok(_md):
            with self.events_lock:
                self.produced += 1
                self.events_f.write(f"{ev['event_id']}\t{ev['load_id']}\t{kind}\t{utc()}\n")

        def err(exc):
            with self.events_lock:
                self.failed_sends += 1
                self.retry.append(ev)
            self.j.log("send failed, will resend", event_id=ev["event_id"], err=str(exc)[:200])

        if resend:
            self.resends += 1
        prod.send(EVENTS_TOPIC, key=ev["load_id"].encode(), value=value).add_callback(ok).add_errback(err)

    def paced(self, prod, gen, rate, secs, label):
        start = time.monotonic()
        sent = 0
        minute_mark, minute_sent = start, 0
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= secs:
                break
            target = int(rate * elapsed) + 1
            while sent < target:
                with self.events_lock:
                    again = self.retry[:]
                    self.retry.clear()
                for ev in again:
                    self.send(prod, ev, resend=True)
                try:
                    ev = next(gen)
                except StopIteration:
                    return sent
                self.send(prod, ev)
                sent += 1
                minute_sent += 1
            if time.monotonic() - minute_mark >= 60:
                self.rates.append({"phase": label, "t": utc(), "events_per_s": round(minute_sent / (time.monotonic() - minute_mark), 1)})
                self.j.log("rate", phase=label, offered=rate, sent_per_s=self.rates[-1]["events_per_s"],
                           acked_total=self.produced)
                minute_mark, minute_sent = time.monotonic(), 0
            time.sleep(0.01)
        return sent

    def run_traffic(self):
        a = self.a
        rng = random.Random(a.seed + 1)
        random.seed(a.seed + 2)
        run = a.run
        loads = []
        for i in range(a.loads):
            client = "client_b" if i % 2 else "client_a"
            quiet = client == "client_b" and i < 2 * a.quiet_loads
            loads.append(traffic.Load(f"soak-{run}-L{i:05d}", client, quiet))
        active = [ld for ld in loads if not ld.quiet]
        quiet = [ld for ld in loads if ld.quiet]
        prod = self.producer()
        self.j.log("phase", name="registrations", loads=len(loads), quiet_loads=len(quiet))
        n = self.paced(prod, (traffic.registration(ld) for ld in loads), a.rate, 3600, "registrations")
        prod.flush(120)
        self.j.log("registrations sent", count=n, acked=self.produced)

        def mixed():
            # The quiet client_b loads leave their pickup first: each opens a reefer reading ask
            # with a 15-minute timer that nothing answers, so the timers come due in the run.
            for ld in quiet:
                yield traffic.stop_status(ld)
                yield traffic.stop_status(ld)
            while True:
                ld = rng.choice(loads) if rng.random() < 0.05 else rng.choice(active)
                yield traffic.next_event(ld)

        gen = mixed()
        traffic_start = time.monotonic()
        secs = a.minutes * 60
        chaos = threading.Thread(target=self.chaos, daemon=True)
        outages = threading.Thread(target=self.outage_plan, args=(traffic_start, secs), daemon=True)
        chaos.start()
        outages.start()
        self.j.log("phase", name="traffic", rate=a.rate, minutes=a.minutes)
        n1 = self.paced(prod, gen, a.rate, secs, "traffic")
        self.j.log("phase", name="tail", rate=a.tail_rate, minutes=a.tail_minutes, traffic_sent=n1)
        n2 = self.paced(prod, gen, a.tail_rate, a.tail_minutes * 60, "tail")
        self.stop_chaos.set()
        outages.join()
        chaos.join()
        deadline = time.time() + 300
        while True:
            prod.flush(60)
            with self.events_lock:
                again = self.retry[:]
                self.retry.clear()
            if not again or time.time() > deadline:
                break
            for ev in again:
                self.send(prod, ev, resend=True)
        prod.close(30)
        self.j.log("traffic done", traffic_sent=n1, tail_sent=n2, acked=self.produced,
                   failed_sends=self.failed_sends, resends=self.resends, unresent=len(self.retry))
        return {"registrations": n, "traffic": n1, "tail": n2}

    # ---------------------------------------------------------------- drain
    def lag(self):
        """Records of the events topic the workers' group has not committed yet (OffsetFetch
        from a consumer that never joins the group, so no rebalance)."""
        try:
            c = KafkaConsumer(bootstrap_servers=self.brokers, group_id=GROUP, enable_auto_commit=False)
            parts = [TopicPartition(EVENTS_TOPIC, p) for p in c.partitions_for_topic(EVENTS_TOPIC) or []]
            ends = c.end_offsets(parts)
            lag = sum(max(0, ends[tp] - (c.committed(tp) or 0)) for tp in parts)
            c.close(autocommit=False)
            return lag
        except Exception as e:  # noqa: BLE001 - the drain only waits longer
            self.j.log("lag unknown", err=str(e)[:200])
            return None

    def drain(self):
        """Waits until the group has committed the whole events topic, no row is pending and no
        timer is overdue, twice 20 s apart. The log may still grow: timers set during the
        traffic keep coming due (and firing) after it."""
        deadline = time.monotonic() + self.a.drain_minutes * 60
        clear_since = None
        state = {}
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.db_url, connect_timeout=5) as c:
                    pending = c.execute("SELECT count(*) FROM outbox WHERE status = 'pending'").fetchone()[0]
                    entries = c.execute("SELECT count(*) FROM log_entries").fetchone()[0]
                    overdue = c.execute("SELECT count(*) FROM timers WHERE status = 'scheduled' "
                                        "AND fire_at < now() - interval '60 seconds'").fetchone()[0]
            except Exception as e:  # noqa: BLE001
                self.j.log("drain: db", err=str(e)[:200])
                time.sleep(5)
                continue
            lag = self.lag()
            clear = pending == 0 and overdue == 0 and lag == 0
            if not clear:
                clear_since = None
            elif clear_since is None:
                clear_since = time.monotonic()
            state = {"pending": pending, "log_entries": entries, "overdue_timers": overdue, "lag": lag,
                     "clear_s": round(time.monotonic() - clear_since) if clear_since else None}
            self.j.log("drain", **state)
            if clear_since is not None and time.monotonic() - clear_since >= 20:
                state["drained"] = True
                return state
            time.sleep(10)
        state["drained"] = False
        return state

    # ---------------------------------------------------------------- main
    def run(self):
        started = utc()
        t0 = time.monotonic()
        watcher = threading.Thread(target=self.watch, daemon=True)
        summary = {"started": started, "args": vars(self.a), "brokers": self.brokers, "db_url": self.db_url}
        try:
            self.database()
            self.start_broker()
            self.j.log("broker", port=self.broker_port, pid=self.broker.p.pid)
            self.topics()
            self.start_roles()
            watcher.start()
            time.sleep(5)
            summary["sent"] = self.run_traffic()
            summary["traffic_ended"] = utc()
            summary["drain"] = self.drain()
            summary["drain_ended"] = utc()
        finally:
            self.done.set()
            stops = {}
            for name, p in self.roles.items():
                stops[name] = p.term()
            self.j.log("roles stopped", codes=stops)
            summary.update({
                "ended": utc(), "secs": round(time.monotonic() - t0),
                "produced_acked": self.produced, "failed_sends": self.failed_sends, "resends": self.resends,
                "kills": self.kills, "exits_by_themselves": self.exits, "outages": self.outages,
                "rates": self.rates, "starts": {n: p.starts for n, p in self.roles.items()},
                "stop_codes": stops,
            })
            self.events_f.flush()
            with open(os.path.join(self.dir, "run.json"), "w") as f:
                json.dump(summary, f, indent=2, default=str)
        if not self.a.no_audit:
            r = subprocess.run([sys.executable, os.path.join(HERE, "audit.py"), "--dir", self.dir,
                                "--brokers", self.brokers, "--db", self.db_url])
            summary["audit_rc"] = r.returncode
        self.broker.term(10)
        self.j.log("broker stopped")
        return summary.get("audit_rc", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=float, default=400)
    ap.add_argument("--loads", type=int, default=4000)
    ap.add_argument("--quiet-loads", type=int, default=300,
                    help="client_b loads that only leave their pickup (timers nobody answers)")
    ap.add_argument("--tail-minutes", type=float, default=10)
    ap.add_argument("--tail-rate", type=float, default=10)
    ap.add_argument("--drain-minutes", type=float, default=15)
    ap.add_argument("--kill-min", type=float, default=20)
    ap.add_argument("--kill-max", type=float, default=60)
    ap.add_argument("--pg-restart-at", type=float, default=0.4, help="fraction of the traffic phase")
    ap.add_argument("--broker-restart-at", type=float, default=0.7, help="fraction of the traffic phase")
    ap.add_argument("--broker-down-secs", type=float, default=3)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "load-agent"))
    ap.add_argument("--nisshi", default=os.path.join(REPO, "target", "tools", "nisshi", "bin", "nisshi"))
    ap.add_argument("--pg-version", default="15")
    ap.add_argument("--pg-cluster", default="soak")
    ap.add_argument("--pg-port", type=int, default=5433)
    ap.add_argument("--db", default="soak")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-audit", action="store_true")
    a = ap.parse_args()
    a.run = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    if a.out is None:
        a.out = os.path.join(REPO, "target", "soak", a.run)
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    latest = os.path.join(os.path.dirname(a.out), "latest")
    if os.path.islink(latest) or not os.path.exists(latest):
        if os.path.islink(latest):
            os.unlink(latest)
        os.symlink(a.out, latest)
    sys.exit(Soak(a).run())


if __name__ == "__main__":
    main()

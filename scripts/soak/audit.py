#!/usr/bin/env python3
"""The chaos soak's audit, written apart from the service's code: it reads only the Kafka
topics (kafka-python, fastavro on schemas/avro/) and the Postgres tables (psycopg), plus the
driver's record of what it produced (events.tsv) and did (run.json).

  audit.py --dir target/soak/<run> --brokers 127.0.0.1:PORT --db postgres://...

Checks:
 (a) every event the driver produced (acknowledged by the broker) is on the events topic, in
     its load's log, and has exactly one decision `dec:<event_id>`; the same for every
     `action_outcome` (relay) and `timer_fired` (pump) record on the topic; no decision
     without its event;
 (b) every outbox row `dispatched` (destination other than `timer`) has a record on its action
     topic, found by the `idempotency-key` header, with its load id as the key; records seen
     again under the same key are redeliveries, counted apart; no record whose key is not an
     outbox row; no row left `pending`; a dead row has its failed outcome in the log;
 (c) timers: none scheduled and overdue (fire_at more than 60 s ago), lateness of every fired
     timer (store: fired_at - fire_at; topic: the timer_fired record's timestamp - fire_at)
     p50 / p99 / max, none over 60 s;
 (d) no load stuck: no pending row, no overdue timer, no undecided event.

Prints a summary, writes audit.json in --dir, exits 1 when a check fails.
"""

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

import psycopg
from kafka import KafkaConsumer, TopicPartition

import traffic

EVENTS_TOPIC = "load-agent.events"
DLQ_TOPIC = "load-agent.events.dlq"
ACTIONS_PREFIX = "load-agent.actions."


def read_topic(brokers, topic, handle):
    """Every record of every partition from the start to the end offsets seen now."""
    c = KafkaConsumer(bootstrap_servers=brokers, enable_auto_commit=False, group_id=None,
                      max_poll_records=5000, fetch_max_bytes=52428800)
    parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
    if not parts:
        c.close()
        return 0
    c.assign(parts)
    c.seek_to_beginning(*parts)
    ends = c.end_offsets(parts)
    left = {tp for tp in parts if ends[tp] > 0}
    n = 0
    idle_since = time.monotonic()
    while left:
        batch = c.poll(timeout_ms=1000)
        if not batch:
            if time.monotonic() - idle_since > 60:
                raise SystemExit(f"{topic}: no records for 60 s with {left} unread")
            continue
        idle_since = time.monotonic()
        for tp, records in batch.items():
            for r in records:
                if r.offset < ends[tp]:
                    handle(tp.partition, r)
                    n += 1
            if c.position(tp) >= ends[tp]:
                left.discard(tp)
    c.close()
    return n


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 3)


def stats(values):
    return {"n": len(values), "p50": pct(values, 50), "p99": pct(values, 99),
            "max": round(max(values), 3) if values else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--late-limit", type=float, default=60)
    a = ap.parse_args()
    t0 = time.monotonic()
    failures = []

    # ------------------------------------------------------------ what the driver produced
    produced = {}
    with open(os.path.join(a.dir, "events.tsv")) as f:
        for line in f:
            eid, load, kind, _t = line.rstrip("\n").split("\t")
            produced[(load, eid)] = kind
    run = {}
    if os.path.exists(os.path.join(a.dir, "run.json")):
        with open(os.path.join(a.dir, "run.json")) as f:
            run = json.load(f)

    # ------------------------------------------------------------ the events topic
    on_topic = Counter()        # (load, event id) -> records
    topic_kind = {}
    by_source = Counter()
    timer_fired = defaultdict(list)  # timer id -> [lateness s of each record]
    bad = []

    def on_event(_p, r):
        try:
            _sid, ev = traffic.decode(r.value)
        except Exception as e:  # noqa: BLE001
            bad.append(str(e))
            return
        load = ev["load_id"]
        key = (load, ev["event_id"])
        on_topic[key] += 1
        branch, payload = ev["payload"]
        kind = branch.split(".")[-1]
        topic_kind[key] = kind
        source = dict(r.headers or []).get("source", b"driver").decode()
        by_source[(source, kind)] += 1
        if r.key is None or r.key.decode() != load:
            bad.append(f"key {r.key!r} is not the load id {load}")
        if kind == "TimerFired":
            fire_at = payload["fire_at"].timestamp()
            timer_fired[payload["timer_id"]].append(r.timestamp / 1000 - fire_at)

    n_events = read_topic(a.brokers, EVENTS_TOPIC, on_event)

    dlq = Counter()

    def on_dlq(_p, r):
        h = dict(r.headers or [])
        dlq[(h.get("dlq-reason-kind", b"?").decode(), h.get("dlq-error-code", b"?").decode())] += 1

    n_dlq = read_topic(a.brokers, DLQ_TOPIC, on_dlq)

    # ------------------------------------------------------------ the action topics
    probe = KafkaConsumer(bootstrap_servers=a.brokers)
    action_topics = sorted(t for t in probe.topics() if t.startswith(ACTIONS_PREFIX))
    probe.close()
    seen = Counter()            # idempotency key -> records
    seen_where = {}
    seen_load = {}
    missing_header = 0
    for topic in action_topics:
        dest = topic[len(ACTIONS_PREFIX):]

        def on_action(_p, r, dest=dest):
            nonlocal missing_header
            key = dict(r.headers or []).get("idempotency-key")
            if key is None:
                missing_header += 1
                return
            k = key.decode()
            seen[k] += 1
            seen_where.setdefault(k, set()).add(dest)
            seen_load[k] = r.key.decode() if r.key else None

        read_topic(a.brokers, topic, on_action)
    n_action_records = sum(seen.values())

    # ------------------------------------------------------------ the database
    with psycopg.connect(a.db) as c:
        entries = c.execute("SELECT load_id, entry_id, kind FROM log_entries").fetchall()
        multi_dec = c.execute(
            "SELECT count(*) FROM (SELECT load_id, entry_id FROM log_entries WHERE kind = 'decision' "
            "GROUP BY load_id, entry_id HAVING count(*) > 1) x").fetchone()[0]
        outbox = c.execute("SELECT id, load_id, destination, status, receipt FROM outbox").fetchall()
        # Overdue as of when the roles were stopped (run.json `ended`): a timer that came due
        # while the audit reads the topics is not the service's.
        cutoff = run.get("ended") or c.execute("SELECT now()::text").fetchone()[0]
        timers = c.execute("SELECT timer_id, load_id, status, fire_at, fired_at, "
                           "fire_at < %s::timestamptz - make_interval(secs => %s) FROM timers",
                           (cutoff, a.late_limit)).fetchall()
        db_now = c.execute("SELECT now()").fetchone()[0]

    decisions = set()
    logged = {}
    for load, eid, kind in entries:
        if kind == "decision":
            decisions.add((load, eid[4:] if eid.startswith("dec:") else eid))
        else:
            logged[(load, eid)] = kind
    orphan_decisions = len(decisions - set(logged))

    # (a) events and decisions
    prod_keys = set(produced)
    lost_on_broker = [k for k in prod_keys if k not in on_topic]
    not_logged = [k for k in prod_keys if k not in logged]
    undecided = [k for k in prod_keys if k not in decisions]
    topic_keys = set(on_topic)
    service_keys = {k for k in topic_keys if topic_kind[k] in ("ActionOutcome", "TimerFired")}
    foreign = {k for k in topic_keys - prod_keys - service_keys}
    svc_not_logged = [k for k in service_keys if k not in logged]
    svc_undecided = [k for k in service_keys if k not in decisions]
    logged_not_on_topic = [k for k in logged if k not in topic_keys]
    topic_undecided = [k for k in topic_keys if k not in decisions]
    redelivered_events = sum(n - 1 for n in on_topic.values() if n > 1)
    kinds_produced = Counter(produced.values())
    outcomes = sum(1 for k in service_keys if topic_kind[k] == "ActionOutcome")
    fired_events = sum(1 for k in service_keys if topic_kind[k] == "TimerFired")

    # (b) outbox rows and action topics
    rows = {r[0]: r for r in outbox}
    status = Counter(r[3] for r in outbox)
    dest_rows = Counter((r[2], r[3]) for r in outbox)
    dispatched = {r[0] for r in outbox if r[3] == "dispatched" and r[2] != "timer"}
    delivered = set(seen)
    missing_on_topic = sorted(dispatched - delivered)
    not_a_row = sorted(k for k in delivered if k not in rows)
    not_dispatched_but_sent = sorted(k for k in delivered if k in rows and rows[k][3] != "dispatched")
    wrong_topic = sorted(k for k in delivered if k in rows and seen_where[k] != {rows[k][2]})
    wrong_key = sorted(k for k in delivered if k in rows and seen_load[k] != rows[k][1])
    redeliveries = sum(n - 1 for n in seen.values() if n > 1)
    keys_redelivered = sum(1 for n in seen.values() if n > 1)
    pending = [r for r in outbox if r[3] == "pending"]
    dead = [r for r in outbox if r[3] == "dead"]
    dead_ids = {r[0] for r in dead}
    failed_outcomes = {eid.split(":", 2)[2] for (_l, eid), k in logged.items()
                       if k == "action_outcome" and eid.startswith("out:failed")}
    dead_without_outcome = sorted(dead_ids - failed_outcomes)

    # (c) timers
    tstatus = Counter(t[2] for t in timers)
    late_store = [(t[4] - t[3]).total_seconds() for t in timers if t[2] == "fired" and t[4] and t[3]]
    overdue = [t for t in timers if t[2] == "scheduled" and t[5]]
    late_topic = [min(v) for v in timer_fired.values()]
    fired_twice_on_topic = sum(1 for v in timer_fired.values() if len(v) > 1)
    fired_ids = {t[0] for t in timers if t[2] == "fired"}
    fired_without_event = sorted(fired_ids - set(timer_fired))
    too_late_store = sum(1 for x in late_store if x > a.late_limit)
    too_late_topic = sum(1 for x in late_topic if x > a.late_limit)

    # (d) stuck loads
    stuck = defaultdict(list)
    for r in pending:
        stuck[r[1]].append("pending row")
    for t in overdue:
        stuck[t[1]].append("overdue timer")
    for k in undecided + svc_undecided:
        stuck[k[0]].append("undecided event")

    lost = len(undecided) + len(missing_on_topic) + len(svc_undecided) + len(overdue)
    duplicated = multi_dec + len(not_a_row)

    def check(name, ok, detail):
        if not ok:
            failures.append(f"{name}: {detail}")

    check("events lost by the broker", not lost_on_broker, f"{len(lost_on_broker)} e.g. {lost_on_broker[:3]}")
    check("produced events not in the log", not not_logged, f"{len(not_logged)} e.g. {not_logged[:3]}")
    check("produced events without a decision", not undecided, f"{len(undecided)} e.g. {undecided[:3]}")
    check("outcome / timer_fired events without a decision", not svc_undecided,
          f"{len(svc_undecided)} e.g. {svc_undecided[:3]}")
    check("events with more than one decision", multi_dec == 0, str(multi_dec))
    check("decisions without an event", orphan_decisions == 0, str(orphan_decisions))
    check("log entries not on the topic", not logged_not_on_topic, f"{len(logged_not_on_topic)} e.g. {logged_not_on_topic[:3]}")
    check("undecoded records on the events topic", not bad, f"{len(bad)} e.g. {bad[:3]}")
    check("dispatched rows missing on their topic", not missing_on_topic, f"{len(missing_on_topic)} e.g. {missing_on_topic[:3]}")
    check("action records that are no outbox row", not not_a_row, f"{len(not_a_row)} e.g. {not_a_row[:3]}")
    check("action records on the wrong topic", not wrong_topic, f"{len(wrong_topic)}")
    check("action records keyed by another load", not wrong_key, f"{len(wrong_key)}")
    check("action records without idempotency-key", missing_header == 0, str(missing_header))
    check("pending outbox rows", not pending, f"{len(pending)} e.g. {[r[0] for r in pending[:3]]}")
    check("dead rows without a failed outcome", not dead_without_outcome, f"{len(dead_without_outcome)}")
    check("overdue scheduled timers", not overdue, f"{len(overdue)} e.g. {[t[0] for t in overdue[:3]]}")
    check(f"timers fired more than {a.late_limit:.0f} s late (store)", too_late_store == 0, str(too_late_store))
    check(f"timers fired more than {a.late_limit:.0f} s late (topic)", too_late_topic == 0, str(too_late_topic))
    check("fired timers without a timer_fired record", not fired_without_event, f"{len(fired_without_event)}")
    check("stuck loads", not stuck, f"{len(stuck)} e.g. {list(stuck.items())[:3]}")

    report = {
        "audited_at": datetime.now(timezone.utc).isoformat(), "db_now": db_now.isoformat(),
        "overdue_cutoff": str(cutoff),
        "audit_secs": round(time.monotonic() - t0, 1),
        "events": {
            "produced_acked": len(produced), "produced_by_kind": dict(kinds_produced),
            "records_on_events_topic": n_events, "distinct_events_on_topic": len(on_topic),
            "event_redeliveries_on_topic": redelivered_events,
            "relay_action_outcomes": outcomes, "pump_timer_fired": fired_events,
            "records_by_source_kind": {f"{s}/{k}": n for (s, k), n in sorted(by_source.items())},
            "other_events_on_topic": len(foreign),
            "log_inbound_entries": len(logged), "decisions": len(decisions),
            "produced_lost_by_broker": len(lost_on_broker), "produced_not_logged": len(not_logged),
            "produced_undecided": len(undecided), "service_events_undecided": len(svc_undecided),
            "events_with_several_decisions": multi_dec, "decisions_without_event": orphan_decisions,
            "topic_records_undecided": len(topic_undecided),
        },
        "dlq": {"records": n_dlq, "by_reason": {f"{k}/{c}": n for (k, c), n in dlq.items()}},
        "outbox": {
            "rows_by_status": dict(status),
            "rows_by_destination_status": {f"{d}/{s}": n for (d, s), n in sorted(dest_rows.items())},
            "dispatched_non_timer": len(dispatched), "action_records": n_action_records,
            "distinct_keys_on_topics": len(delivered), "missing_on_topic": len(missing_on_topic),
            "records_not_an_outbox_row": len(not_a_row),
            "sent_but_row_not_dispatched": len(not_dispatched_but_sent),
            "redeliveries": redeliveries, "keys_redelivered": keys_redelivered,
            "pending": len(pending), "dead": len(dead), "dead_without_failed_outcome": len(dead_without_outcome),
        },
        "timers": {
            "by_status": dict(tstatus), "overdue_scheduled": len(overdue),
            "lateness_store_s": stats(late_store), "lateness_topic_s": stats(late_topic),
            "over_limit_store": too_late_store, "over_limit_topic": too_late_topic,
            "timer_fired_published_twice": fired_twice_on_topic,
            "fired_without_timer_fired_record": len(fired_without_event),
        },
        "stuck_loads": len(stuck),
        "lost": lost, "duplicated": duplicated,
        "chaos": {
            "kills_by_role": dict(Counter(k["role"] for k in run.get("kills", []))),
            "kills": len(run.get("kills", [])),
            "outages": run.get("outages", []),
            "exits_by_themselves": [{k: v for k, v in e.items() if k != "log_tail"}
                                    for e in run.get("exits_by_themselves", [])],
        },
        "failures": failures,
        "ok": not failures,
    }
    with open(os.path.join(a.dir, "audit.json"), "w") as f:
        json.dump(report, f, indent=2, default=str)
    e, o, t = report["events"], report["outbox"], report["timers"]
    print(f"""
== chaos soak audit ({a.dir})
events produced (acked) {e['produced_acked']}, on topic {e['distinct_events_on_topic']} distinct / {e['records_on_events_topic']} records
  + relay action_outcome {e['relay_action_outcomes']}, pump timer_fired {e['pump_timer_fired']}
  decisions {e['decisions']}; produced undecided {e['produced_undecided']}; service events undecided {e['service_events_undecided']}; several decisions {e['events_with_several_decisions']}
outbox {o['rows_by_status']}; dispatched (non-timer) {o['dispatched_non_timer']}; action records {o['action_records']}
  missing on topic {o['missing_on_topic']}; not a row {o['records_not_an_outbox_row']}; redeliveries {o['redeliveries']} ({o['keys_redelivered']} keys)
timers {t['by_status']}; overdue {t['overdue_scheduled']}
  lateness store {t['lateness_store_s']}
  lateness topic {t['lateness_topic_s']}
DLQ {report['dlq']}
kills {report['chaos']['kills_by_role']}; outages {len(report['chaos']['outages'])}; exits by themselves {len(report['chaos']['exits_by_themselves'])}
stuck loads {report['stuck_loads']}; LOST {lost}; DUPLICATED {duplicated}
{'OK' if not failures else 'FAILED:' + chr(10) + chr(10).join('  - ' + x for x in failures)}""")
    sys.exit(0 if not failures else 1)


if __name__ == "__main__":
    main()

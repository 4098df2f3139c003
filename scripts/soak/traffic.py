"""Synthetic freight traffic for the chaos soak: Avro InboundEvent records (Confluent framing,
schema id 1 from schemas/avro/ids.json) built with fastavro from the schema file, not with the
service's code.

Every event has a unique event id `soak-<run>-<load>-<n>`; the record key is the load id.
"""

import json
import os
import random
import struct
from datetime import datetime, timedelta, timezone
from io import BytesIO

import fastavro

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMA_DIR = os.path.join(REPO, "schemas", "avro")


def _schema_id(record):
    with open(os.path.join(SCHEMA_DIR, "ids.json")) as f:
        ids = json.load(f)
    newest = max((s for s in ids["schemas"] if s["record"] == record), key=lambda s: s["version"])
    return newest["id"], newest["file"]


INBOUND_ID, INBOUND_FILE = _schema_id("load_agent.InboundEvent")
with open(os.path.join(SCHEMA_DIR, INBOUND_FILE)) as _f:
    INBOUND = fastavro.parse_schema(json.load(_f))


def encode(event):
    """Confluent framing: magic 0, 4-byte big-endian schema id, the Avro body."""
    buf = BytesIO()
    buf.write(b"\x00" + struct.pack(">I", INBOUND_ID))
    fastavro.schemaless_writer(buf, INBOUND, event)
    return buf.getvalue()


def decode(value):
    """(schema id, record) with the payload as (branch name, fields)."""
    if len(value) < 5 or value[0] != 0:
        raise ValueError("not Confluent framing")
    sid = struct.unpack(">I", value[1:5])[0]
    if sid != INBOUND_ID:
        raise ValueError(f"schema id {sid}")
    rec = fastavro.schemaless_reader(BytesIO(value[5:]), INBOUND, INBOUND, return_record_name=True)
    return sid, rec


def _now():
    return datetime.now(timezone.utc)


CENTRAL = timezone(timedelta(hours=-6))

DRIVER_SMS = [
    "running late, there by 3pm",
    "running late, there by 5pm",
    "10-4",
    "ok",
    "whats the po# for this one",
    "where do i check in",
    "at the gate",
    "loaded and rolling",
    "stuck in traffic on I-80, eta 4pm",
    "thanks",
]
DISPATCHER_EMAIL = [
    ("Re: load update", "Driver is running about 2 hours behind, new ETA 5pm."),
    ("Re: load update", "Truck broke down, we are sending a mechanic. Will update."),
    ("Re: load update", "Driver confirmed the appointment, on schedule."),
    ("Question", "Can you send the rate confirmation again?"),
]
BROKER_SLACK = ["any update on this one?", "customer asking for ETA", "thx"]


class Load:
    __slots__ = ("load_id", "client", "n", "risk", "stop_step", "quiet")

    def __init__(self, load_id, client, quiet=False):
        self.load_id = load_id
        self.client = client
        self.n = 0
        self.risk = "low"
        self.stop_step = 0
        self.quiet = quiet

    def next_id(self, kind):
        self.n += 1
        return f"{self.load_id}-{kind}-{self.n}"


def _event(load, kind, payload_name, payload):
    return {
        "event_id": load.next_id(kind),
        "load_id": load.load_id,
        "occurred_at": _now(),
        "payload": (f"load_agent.{payload_name}", payload),
    }


def registration(load):
    now = _now()
    digits = int.from_bytes(load.load_id.encode()[-4:], "big") % 10_000
    contacts = [
        {"id": "drv", "role": "driver", "name": "Luis", "phone": f"+1312555{digits:04d}",
         "email": None, "slack": None, "language": "en"},
        {"id": "disp", "role": "carrier_dispatcher", "name": "Dana", "phone": None,
         "email": f"dispatch+{digits:04d}@carrier.example", "slack": "#carrier-dana", "language": "en"},
        {"id": "brk", "role": "broker", "name": "Sam", "phone": None, "email": None,
         "slack": "#broker-sam", "language": "en"},
    ]
    stops = [
        {"sequence": 1, "kind": "pickup", "name": "Acme DC", "address": "1 Dock Rd",
         "appointment": (now + timedelta(hours=3)).astimezone(CENTRAL).isoformat(timespec="seconds"),
         "po_numbers": ["55821"], "reference": None},
        {"sequence": 2, "kind": "delivery", "name": "Store 88", "address": "88 Main St",
         "appointment": (now + timedelta(hours=12)).astimezone(CENTRAL).isoformat(timespec="seconds"),
         "po_numbers": [], "reference": None},
    ]
    reefer = {"set_point_f": 34.0, "tolerance_f": 4.0} if load.client == "client_b" else None
    body = {"load_id": load.load_id, "client": load.client, "sop_version": None,
            "contacts": contacts, "stops": stops, "reefer": reefer}
    ev = _event(load, "reg", "LoadRegistered", body)
    return ev


def ping(load, risk=None):
    if risk is None:
        # Mostly the same band as before (filtered); sometimes a change.
        risk = load.risk if random.random() < 0.8 else random.choice(["low", "medium", "high"])
    load.risk = risk
    now = _now()
    stop = 1 if load.stop_step < 2 else 2
    return _event(load, "ping", "Ping", {"stop": stop, "delay_risk": risk, "recorded_at": now,
                                          "lat": 41.88, "lon": -87.63})


STOP_STEPS = [(1, "arrived"), (1, "departed"), (2, "arrived"), (2, "delivered")]


def stop_status(load):
    if load.stop_step >= len(STOP_STEPS):
        return None
    stop, status = STOP_STEPS[load.stop_step]
    load.stop_step += 1
    return _event(load, "stop", "StopStatus", {"stop": stop, "status": status, "source": "geofence"})


def sms(load, text=None):
    return _event(load, "sms", "Sms", {"from": "drv", "text": text or random.choice(DRIVER_SMS)})


def email(load):
    subject, text = random.choice(DISPATCHER_EMAIL)
    return _event(load, "email", "Email", {"from": "disp", "subject": subject, "text": text, "thread": "main"})


def slack(load):
    return _event(load, "slack", "Slack", {"from": "brk", "text": random.choice(BROKER_SLACK)})


def attachment(load):
    doc = random.choice(["bol", "pod"])
    return _event(load, "att", "Attachment", {
        "from": "drv", "channel": "sms", "filename": f"{doc}.jpg", "content_type": "image/jpeg",
        "content_ref": f"s3://docs/{load.load_id}/{doc}.jpg",
        "extracted": {"document_type": doc, "signed": True, "exceptions_noted": False,
                      "po_numbers": ["55821"], "seal": "S-1", "pieces": 22, "temperature_f": None}})


def next_event(load):
    """One realistic event for a load of the mixed traffic."""
    if load.quiet:
        return ping(load, load.risk)
    r = random.random()
    if r < 0.45:
        return ping(load)
    if r < 0.75:
        return sms(load)
    if r < 0.85:
        ev = stop_status(load)
        if ev is not None:
            return ev
        return ping(load)
    if r < 0.93:
        return email(load)
    if r < 0.96:
        return slack(load)
    return attachment(load)

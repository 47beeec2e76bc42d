#!/usr/bin/env python3
"""Conformance kit for the aclaim wire protocol, version 1.6 (docs/protocol.md).

Point it at a running coordinator. It sends every message type in both encodings, checks every
reply against the spec's field tables (exact fields, types, ranges, UTF-8, lengths), causes every
error code and rejection reason a client can cause, and sends the spec's examples verbatim. For
protocol 1.2 it checks the feature negotiation (HELLO's features, WELCOME's grant) and the COMPLETE
that carries the next CLAIM (the order of its two answers, refusals, invalid claims, the drain).
For protocol 1.3, the RENEW that names every held job (renew_held): each job answered LEASE or
REVOKED under its own req (a stale generation, another organization's job), a list too long or
malformed refused as one ERROR, a refusal before HELLO answering every job. For protocol 1.5,
PROGRESS (progress): stored and answered ACCEPTED for the holder, refused like a completion for a
stale generation, ERROR invalid beyond its bounds, and the checkpoint handed to the next holder in
ASSIGNED's resume (only to a worker that asked for progress). For protocol 1.6, PARK (park):
PARKED with a callback token for the holder, ERROR invalid beyond its bounds, REJECTED for a stale
generation and for the holder's own COMPLETE after it; with --http (the coordinator's HTTP
endpoint), the callback accepted once, its replay refused 409 and a forged token 401. Workflows
(no message changed): a job enqueued with depends_on is not assigned before its dependency's
completion is accepted, nor after a stale one, and is assigned once it is.

Situations that need jobs or keys are set up with aclaimctl (--aclaimctl, with --dsn or
ACLAIM_DSN); a quarantined job needs the database itself (--dsn and psql). Without them those
checks are listed as not exercised. --coordinator-pid lets the kit send SIGTERM at the end to
check the drain; the coordinator then exits.

The output is one line per check and ends with "N passed, M failed"; the exit status is 1 when
anything failed. Only the Python standard library and pyzmq are needed.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import zmq

TAG_BINARY = b"ACLAIM/1"
TAG_JSON = b"ACLAIM/1+json"
MAX_TRANSPORT = 1024 * 1024
MAX_TEXT = 1024

# ---- the spec's tables ----

# Field order is the binary order (docs/protocol.md, "Field order").
REQUEST_FIELDS = {
    "HELLO": [("req", "u64"), ("worker_id", "str"), ("org_id", "i64")],
    "CLAIM": [("req", "u64"), ("max_jobs", "i32"), ("wait_ms", "i32")],
    "RENEW": [("req", "u64"), ("job_id", "i64"), ("generation", "i64")],
    "COMPLETE": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("result_ref", "str")],
    "FAIL": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("reason", "str"),
             ("retryable", "bool")],
    "RELEASE": [("req", "u64"), ("job_id", "i64"), ("generation", "i64")],
    "BYE": [("req", "u64")],
    "PROGRESS": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("percent", "i32"),
                 ("note", "str"), ("checkpoint", "str")],  # 1.5
    "PARK": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("timeout_ms", "i64"),
             ("note", "str")],  # 1.6
}
JOB_FIELDS = [("job_id", "i64"), ("generation", "i64"), ("lease_expires_at_us", "i64"),
              ("lease_ms", "i32"), ("attempts", "i32"), ("priority", "i32"), ("payload", "str")]
REPLY_FIELDS = {
    "WELCOME": [("req", "u64"), ("org_id", "i64"), ("lease_ms", "i32"), ("heartbeat_ms", "i32"),
                ("max_body_bytes", "u32")],
    "ASSIGNED": [("req", "u64"), ("jobs", "jobs")],
    "NO_WORK": [("req", "u64"), ("reason", "str")],
    "LEASE": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"),
              ("lease_expires_at_us", "i64"), ("lease_ms", "i32")],
    "REVOKED": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("reason", "str"),
                ("detail", "str")],
    "ACCEPTED": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("state", "str"),
                 ("replayed", "bool")],
    "REJECTED": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("reason", "str"),
                 ("detail", "str")],
    "ERROR": [("req", "u64"), ("code", "str"), ("text", "str")],
    "PARKED": [("req", "u64"), ("job_id", "i64"), ("generation", "i64"), ("token", "str"),
               ("deadline_us", "i64")],  # 1.6
}
ALL_FIELDS = {**REQUEST_FIELDS, **REPLY_FIELDS}
# Optional members (docs/protocol.md, "Optional members"), after the table's fields in this order.
# In binary each is present exactly when bytes remain, so an empty one is written when a later
# one is; in JSON each is present when the object names it.
OPTIONAL_FIELDS = {
    "HELLO": [("queues", "strs"), ("features", "strs")],  # 1.1, 1.2
    "COMPLETE": [("next", "claims")],  # 1.2
    "RENEW": [("held", "held")],  # 1.3
    "WELCOME": [("features", "strs"), ("sessions", "i64")],  # 1.2, 1.4
    "ERROR": [("retry_after_ms", "i32")],  # 1.4
    "ASSIGNED": [("resume", "resume")],  # 1.5
}
RESUME_FIELDS = [("job_id", "i64"), ("generation", "i64"), ("percent", "i32"), ("note", "str"),
                 ("checkpoint", "str")]
PROGRESS = "progress"  # protocol 1.5
PARK = "park"  # protocol 1.6
MAX_PARK_TIMEOUT_MS = 30 * 24 * 3600 * 1000
MAX_NOTE = 200
MAX_CHECKPOINT = 4096
CLAIM_FIELDS = REQUEST_FIELDS["CLAIM"]
FEATURE = "complete_claim"
RENEW_HELD = "renew_held"  # protocol 1.3
MAX_HELD = 1024  # jobs one RENEW may name: its own and 1023 held
HELD_FIELDS = REQUEST_FIELDS["RENEW"]
MAX_FEATURES = 16
RANGES = {"u64": (0, 2**64 - 1), "i64": (-2**63, 2**63 - 1), "i32": (-2**31, 2**31 - 1),
          "u32": (0, 2**32 - 1)}
REJECTIONS = {"unknown_job", "other_organization", "stale_generation", "lease_expired",
              "already_terminal", "not_assignee", "quarantined", "cancelled", "deadline_exceeded"}
ERROR_CODES = {"malformed", "wrong_version", "unknown_type", "oversized", "undecodable", "invalid",
               "no_session", "too_many_requests", "overloaded", "database_unavailable",
               "database_error", "not_committed", "outcome_unknown", "draining",
               "unauthenticated", "key_revoked", "queue_not_allowed"}
# ACCEPTED.state (docs/protocol.md, the ACCEPTED row); "assigned": the state a PROGRESS (1.5)
# leaves its job in. A job waiting out its backoff is "pending" and one out of attempts "failed"
# on the wire: since 1.1 a worker sees scheduling and discarding only as rejection reasons.
STATES = {"completed", "failed", "pending", "assigned"}
# What may answer each request (BYE is never answered).
ANSWERS = {"HELLO": {"WELCOME", "ERROR"}, "CLAIM": {"ASSIGNED", "NO_WORK", "ERROR"},
           "RENEW": {"LEASE", "REVOKED", "ERROR"},
           "COMPLETE": {"ACCEPTED", "REJECTED", "ERROR"},
           "FAIL": {"ACCEPTED", "REJECTED", "ERROR"},
           "RELEASE": {"ACCEPTED", "REJECTED", "ERROR"},
           "PROGRESS": {"ACCEPTED", "REJECTED", "ERROR"},
           "PARK": {"PARKED", "REJECTED", "ERROR"}}


class Malformed(Exception):
    """A message that does not match the spec."""


def field_ranges(kind, msg):
    """The range rules of the coordinator -> worker table."""
    problems = []

    def need(ok, what):
        if not ok:
            problems.append(what)

    def text(name, low=0):
        v = msg.get(name, "")
        need(low <= len(v.encode("utf-8", "surrogatepass")) <= MAX_TEXT,
             f"{name} must be {low}..{MAX_TEXT} bytes")

    if "job_id" in msg:
        need(msg["job_id"] >= 0, "job_id must be >= 0")
        need(msg["generation"] >= 0, "generation must be >= 0")
    if kind == "WELCOME":
        need(msg["org_id"] >= 0, "org_id must be >= 0")
        need(msg["lease_ms"] > 0, "lease_ms must be > 0")
        need(msg["heartbeat_ms"] > 0, "heartbeat_ms must be > 0")
        features = msg.get("features", [])
        need(len(features) <= MAX_FEATURES, f"features must hold at most {MAX_FEATURES} names")
        need(all(1 <= len(f.encode("utf-8")) <= 64 and all("\x21" <= ch <= "\x7e" for ch in f)
                 for f in features),
             "features must be names of 1..64 printable ASCII bytes without spaces")
    elif kind == "ASSIGNED":
        need(1 <= len(msg["jobs"]) <= 100, "jobs must hold 1..100 entries")
        for j in msg["jobs"]:
            need(j["job_id"] >= 0 and j["generation"] >= 0, "job ids and generations >= 0")
            need(j["lease_ms"] > 0, "jobs[].lease_ms must be > 0")
        resume = msg.get("resume", [])
        need(len(resume) <= len(msg["jobs"]), "resume must hold at most one entry per job")
        for r in resume:
            need(r["job_id"] in {j["job_id"] for j in msg["jobs"]},
                 "resume[] must name jobs of the same ASSIGNED")
            need(0 <= r["percent"] <= 100, "resume[].percent must be 0..100")
            need(len(r["note"].encode("utf-8")) <= MAX_NOTE, "resume[].note at most 200 bytes")
            need(len(r["checkpoint"].encode("utf-8")) <= MAX_CHECKPOINT,
                 "resume[].checkpoint at most 4096 bytes")
    elif kind == "NO_WORK":
        text("reason")
    elif kind == "LEASE":
        need(msg["lease_ms"] > 0, "lease_ms must be > 0")
    elif kind == "REVOKED":
        text("reason")
        text("detail")
        need(msg["reason"] in REJECTIONS | {"reclaimed"}, f"unknown REVOKED reason {msg['reason']!r}")
    elif kind == "ACCEPTED":
        text("state")
        need(msg["state"] in STATES, f"unknown state {msg['state']!r}")
    elif kind == "REJECTED":
        text("reason")
        text("detail")
        need(msg["reason"] in REJECTIONS, f"unknown rejection {msg['reason']!r}")
    elif kind == "ERROR":
        text("code", 1)
        text("text")
        need(msg["code"] in ERROR_CODES, f"undocumented error code {msg['code']!r}")
    return problems


# ---- the binary encoding ----

def pack_value(kind, value):
    if kind == "u64":
        return struct.pack("<Q", value)
    if kind == "i64":
        return struct.pack("<q", value)
    if kind == "i32":
        return struct.pack("<i", value)
    if kind == "u32":
        return struct.pack("<I", value)
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "str":
        raw = value if isinstance(value, bytes) else value.encode("utf-8")
        return struct.pack("<Q", len(raw)) + raw
    if kind == "jobs":
        return struct.pack("<Q", len(value)) + b"".join(
            pack_value(k, job[n]) for job in value for n, k in JOB_FIELDS)
    if kind == "strs":
        return struct.pack("<Q", len(value)) + b"".join(pack_value("str", v) for v in value)
    if kind == "claims":
        return struct.pack("<Q", len(value)) + b"".join(
            pack_value(k, claim[n]) for claim in value for n, k in CLAIM_FIELDS)
    if kind == "held":
        return struct.pack("<Q", len(value)) + b"".join(
            pack_value(k, entry[n]) for entry in value for n, k in HELD_FIELDS)
    if kind == "resume":
        return struct.pack("<Q", len(value)) + b"".join(
            pack_value(k, entry[n]) for entry in value for n, k in RESUME_FIELDS)
    raise ValueError(kind)


def present_optionals(kind, msg):
    """The optional members a binary body carries: up to the last one `msg` names, the earlier
    ones written empty when `msg` leaves them out."""
    optional = OPTIONAL_FIELDS.get(kind, [])
    named = [i for i, (n, _) in enumerate(optional) if n in msg]
    return optional[:named[-1] + 1] if named else []


def encode_binary(kind, msg):
    return b"\x01" + b"".join(pack_value(k, msg[n]) for n, k in ALL_FIELDS[kind]) + b"".join(
        pack_value(k, msg.get(n, [])) for n, k in present_optionals(kind, msg))


class BinaryReader:
    SIZES = {"u64": ("Q", 8), "i64": ("q", 8), "i32": ("i", 4), "u32": ("I", 4)}

    def __init__(self, body):
        if not body or body[0] not in (0, 1):
            raise Malformed("the endianness byte must be 0x00 or 0x01")
        self.order = "<" if body[0] == 1 else ">"
        self.body = body
        self.at = 1

    def take(self, n, name):
        if self.at + n > len(self.body):
            raise Malformed(f"truncated in field {name!r}")
        out = self.body[self.at:self.at + n]
        self.at += n
        return out

    def read(self, kind, name):
        if kind in self.SIZES:
            code, size = self.SIZES[kind]
            return struct.unpack(self.order + code, self.take(size, name))[0]
        if kind == "bool":
            b = self.take(1, name)[0]
            if b not in (0, 1):
                raise Malformed(f"bool field {name!r} holds {b}")
            return b == 1
        if kind == "str":
            n = self.read("u64", name)
            raw = self.take(n, name)
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Malformed(f"field {name!r} is not UTF-8: {e}") from None
        if kind == "jobs":
            return [{n: self.read(k, f"jobs[{i}].{n}") for n, k in JOB_FIELDS}
                    for i in range(self.read("u64", name))]
        if kind == "strs":
            return [self.read("str", f"{name}[{i}]") for i in range(self.read("u64", name))]
        if kind == "claims":
            return [{n: self.read(k, f"{name}[{i}].{n}") for n, k in CLAIM_FIELDS}
                    for i in range(self.read("u64", name))]
        if kind == "held":
            return [{n: self.read(k, f"{name}[{i}].{n}") for n, k in HELD_FIELDS}
                    for i in range(self.read("u64", name))]
        if kind == "resume":
            return [{n: self.read(k, f"{name}[{i}].{n}") for n, k in RESUME_FIELDS}
                    for i in range(self.read("u64", name))]
        raise ValueError(kind)


def decode_binary(kind, body):
    r = BinaryReader(body)
    msg = {n: r.read(k, n) for n, k in ALL_FIELDS[kind]}
    for n, k in OPTIONAL_FIELDS.get(kind, []):
        if r.at == len(body):
            break
        msg[n] = r.read(k, n)
    if r.at != len(body):
        raise Malformed(f"{len(body) - r.at} trailing bytes")
    return msg


# ---- the JSON encoding ----

def encode_json(msg):
    return json.dumps(msg, ensure_ascii=False, separators=(",", ": ")).encode("utf-8")


def check_json_value(kind, value, name):
    if kind in RANGES:
        if type(value) is not int:
            raise Malformed(f"field {name!r} must be a JSON integer, got {value!r}")
        low, high = RANGES[kind]
        if not low <= value <= high:
            raise Malformed(f"field {name!r} = {value} is beyond {kind}")
    elif kind == "bool":
        if type(value) is not bool:
            raise Malformed(f"field {name!r} must be true or false, got {value!r}")
    elif kind == "str":
        if type(value) is not str:
            raise Malformed(f"field {name!r} must be a string, got {value!r}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Malformed(f"field {name!r} holds an unpaired surrogate") from None
        if "\0" in value:
            raise Malformed(f"field {name!r} holds U+0000")
    elif kind in ARRAYS:
        if type(value) is not list:
            raise Malformed(f"field {name!r} must be an array")
        for i, element in enumerate(value):
            if kind == "strs":
                check_json_value("str", element, f"{name}[{i}]")
            else:
                check_json_object(ARRAYS[kind], element, f"{name}[{i}]")


# The arrays' element tables: strings, or objects of these fields.
ARRAYS = {"jobs": JOB_FIELDS, "strs": None, "claims": CLAIM_FIELDS, "held": HELD_FIELDS,
          "resume": RESUME_FIELDS}


def no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise Malformed(f"member {k!r} appears twice")
        seen[k] = v
    return seen


def check_json_object(fields, obj, where, optional=()):
    if type(obj) is not dict:
        raise Malformed(f"{where} must be an object")
    names = [n for n, _ in fields]
    present = [n for n, _ in optional if n in obj]
    if sorted(obj) != sorted(names + present):
        raise Malformed(f"{where} has members {sorted(obj)}, the table says {sorted(names)}" +
                        (f" and optionally {[n for n, _ in optional]}" if optional else ""))
    for n, k in list(fields) + [f for f in optional if f[0] in obj]:
        check_json_value(k, obj[n], n)


def decode_json(kind, body):
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Malformed(f"body is not UTF-8: {e}") from None
    try:
        obj = json.loads(text, object_pairs_hook=no_duplicates,
                         parse_constant=lambda c: (_ for _ in ()).throw(Malformed(c)))
    except json.JSONDecodeError as e:
        raise Malformed(f"body is not JSON: {e}") from None
    check_json_object(ALL_FIELDS[kind], obj, "body", OPTIONAL_FIELDS.get(kind, ()))
    return obj


def decode_reply(frames, encoding):
    """(type, fields) of a reply, or Malformed naming what breaks the spec."""
    if len(frames) != 3:
        raise Malformed(f"{len(frames)} frames, not 3")
    tag, kind_raw, body = frames
    want = TAG_JSON if encoding == "json" else TAG_BINARY
    if tag != want:
        raise Malformed(f"tag {tag!r}, expected {want!r} (replies use the request's encoding)")
    kind = kind_raw.decode("ascii", "replace")
    if kind not in REPLY_FIELDS:
        raise Malformed(f"type {kind!r} is not a coordinator -> worker message")
    msg = decode_json(kind, body) if encoding == "json" else decode_binary(kind, body)
    problems = field_ranges(kind, msg)
    if problems:
        raise Malformed("; ".join(problems))
    return kind, msg


# ---- the kit ----

class Reply:
    def __init__(self, kind, msg, frames):
        self.kind, self.msg, self.frames = kind, msg, frames

    def __getitem__(self, name):
        return self.msg[name]

    def __repr__(self):
        return f"{self.kind} {self.msg}"


class Kit:
    def __init__(self, args):
        self.args = args
        self.context = zmq.Context()
        self.passed = 0
        self.failed = 0
        self.not_exercised = []
        self.codes_seen = set()
        self.reasons_seen = set()
        self.run_id = f"{os.getpid()}-{random.randrange(10**6)}"
        self.server_public = None
        if args.server_key_file:
            with open(args.server_key_file, "rb") as f:
                self.server_public = f.readline().strip()
        elif args.server_key:
            self.server_public = args.server_key.encode()
        self.curve = self.server_public is not None
        self.lease_ms = None

    # -- reporting --
    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok      {name}")
        else:
            self.failed += 1
            print(f"FAILED  {name}" + (f": {detail}" if detail else ""))
        sys.stdout.flush()
        return ok

    def skip(self, what, why):
        self.not_exercised.append(f"{what} ({why})")

    # -- set-up through the operator's tools --
    def ctl(self, *argv):
        cmd = [self.args.aclaimctl] + (["--dsn", self.args.dsn] if self.args.dsn else []) + list(argv)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {done.stderr.strip()}")
        return done.stdout

    def enqueue(self, org, payload, max_attempts=3, *extra):
        self.ctl("enqueue", "--org", str(org), "--max-attempts", str(max_attempts), *extra,
                 payload)

    def new_identity(self, org, name):
        """A worker of `org`: under CURVE a fresh key registered under `name`."""
        if not self.curve:
            return {"org": org, "name": name, "keys": None}
        public, secret = zmq.curve_keypair()
        self.ctl("keys", "register", "--org", str(org), "--name", name, "--public-key",
                 public.decode())
        return {"org": org, "name": name, "keys": (public, secret)}

    def new_org(self):
        return random.randrange(100_000, 2**31 - 1)

    def connect(self, identity=None, keys=None):
        s = self.context.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        keys = keys or (identity["keys"] if identity else None)
        if self.curve:
            if keys is None:
                keys = zmq.curve_keypair()
            s.curve_serverkey = self.server_public
            s.curve_publickey, s.curve_secretkey = keys
        s.connect(self.args.endpoint)
        return Conn(self, s)


class Conn:
    def __init__(self, kit, socket):
        self.kit = kit
        self.socket = socket
        self.next = 0
        self.pushes = []
        self.early = {}

    def close(self):
        self.socket.close(0)

    def req(self):
        self.next += 1
        return self.next

    def send(self, kind, encoding, **fields):
        if "req" not in fields:
            fields["req"] = self.req()
        msg = {n: fields[n] for n, _ in ALL_FIELDS[kind]}
        # Optional members (HELLO's queues and features, COMPLETE's next) follow the table's
        # fields; in JSON anything else given is sent too (to provoke an unknown member).
        msg.update({n: v for n, v in fields.items() if n not in msg and
                    (encoding == "json" or n in dict(OPTIONAL_FIELDS.get(kind, [])))})
        body = encode_json(msg) if encoding == "json" else encode_binary(kind, msg)
        tag = TAG_JSON if encoding == "json" else TAG_BINARY
        self.socket.send_multipart([tag, kind.encode(), body])
        return fields["req"]

    def send_raw(self, frames):
        self.socket.send_multipart(frames)

    def receive(self, timeout_ms):
        if not self.socket.poll(timeout_ms):
            return None
        return self.socket.recv_multipart()

    def reply(self, req, encoding, what, timeout_ms=10_000, allowed=None):
        """The answer to `req`, checked against the tables; pushes and other answers are kept."""
        if req in self.early:
            return self.early.pop(req)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            r = self.next_reply(deadline, encoding, what,
                                f"no answer to req {req} in {timeout_ms} ms")
            if r is None:
                return None
            if r.msg["req"] == req:
                ok = allowed is None or r.kind in allowed
                self.kit.check(f"{what}: reply matches the field tables", ok,
                               f"{r.kind} is not among {sorted(allowed or [])}: {r.msg}")
                if encoding == "json":
                    self.kit.check(f"{what}: JSON written on one line", b"\n" not in r.frames[2])
                return r
            self.keep(r)

    def next_reply(self, deadline, encoding, what, unanswered):
        """The next message before `deadline`, decoded, its error code or refusal reason noted;
        None (a failed check: `unanswered`, or the message off the tables) when none comes."""
        left = int((deadline - time.monotonic()) * 1000)
        frames = self.receive(left) if left > 0 else None
        if frames is None:
            self.kit.check(f"{what}: answered", False, unanswered)
            return None
        try:
            kind, msg = decode_reply(frames, encoding)
        except Malformed as e:
            self.kit.check(f"{what}: reply matches the field tables", False,
                           f"{e}; frames {frames!r:.300}")
            return None
        if kind == "ERROR":
            self.kit.codes_seen.add(msg["code"])
        if kind in ("REJECTED", "REVOKED"):
            self.kit.reasons_seen.add(msg["reason"])
        return Reply(kind, msg, frames)

    def keep(self, r):
        """Keeps a message that answers nothing awaited: a push, or an answer arriving early."""
        if r.msg["req"] == 0:
            self.pushes.append(r)
        else:
            self.early[r.msg["req"]] = r

    def in_order(self, reqs, encoding, what, timeout_ms=10_000):
        """The answers to `reqs` in the order they arrive (pushes and other answers kept
        aside), each checked against the tables; None when one does not come."""
        got = [self.early.pop(q) for q in reqs if q in self.early]
        deadline = time.monotonic() + timeout_ms / 1000
        while len(got) < len(reqs):
            r = self.next_reply(
                deadline, encoding, what,
                f"{len(got)} of {len(reqs)} answers to reqs {reqs} in {timeout_ms} ms")
            if r is None:
                return None
            if r.msg["req"] in reqs:
                got.append(r)
            else:
                self.keep(r)
        self.kit.check(f"{what}: replies match the field tables", True)
        return got

    def expect_in_order(self, kinds, reqs, encoding, what, timeout_ms=10_000):
        """`kinds` answering `reqs`, in that order; the answers, or None."""
        got = self.in_order(reqs, encoding, what, timeout_ms)
        if got is None:
            return None
        seen = [(r.kind, r["req"]) for r in got]
        detail = "; ".join(f"{r.kind} {r.msg.get('code', r.msg.get('reason', ''))}" for r in got)
        if not self.kit.check(f"{what}: answered {' then '.join(kinds)}",
                              seen == list(zip(kinds, reqs)), f"got {seen}: {detail}"):
            return None
        return got

    def expect(self, kind, req, encoding, what, timeout_ms=10_000):
        r = self.reply(req, encoding, what, timeout_ms)
        if r is None:
            return None
        extra = f": {r.msg.get('code', '')} {r.msg.get('text', r.msg.get('reason', ''))}"
        if not self.kit.check(f"{what}: answered {kind}", r.kind == kind, f"got {r.kind}{extra}"):
            return None
        return r

    def expect_error(self, code, req, encoding, what, timeout_ms=10_000):
        r = self.expect("ERROR", req, encoding, what, timeout_ms)
        if r is not None:
            self.kit.check(f"{what}: code {code}", r["code"] == code,
                           f"got {r['code']}: {r['text']}")
        return r

    def expect_rejected(self, reason, req, encoding, what):
        r = self.expect("REJECTED", req, encoding, what)
        if r is not None:
            self.kit.check(f"{what}: reason {reason}", r["reason"] == reason,
                           f"got {r['reason']}: {r['detail']}")
        return r

    def silent(self, timeout_ms):
        frames = self.receive(timeout_ms)
        return frames is None

    def hello(self, identity, encoding, what, org=None, **optional):
        req = self.send("HELLO", encoding, worker_id=identity["name"],
                        org_id=identity["org"] if org is None else org, **optional)
        r = self.expect("WELCOME", req, encoding, what)
        if r is not None:
            self.kit.check(f"{what}: session acts for the worker's organization",
                           r["org_id"] == identity["org"], f"org_id {r['org_id']}")
            self.kit.lease_ms = r["lease_ms"]
        return r

    def complete_claim(self, encoding, job, result_ref, max_jobs=1, wait_ms=0, next_req=None):
        """COMPLETE of `job` carrying a CLAIM (protocol 1.2): the two request ids."""
        done = self.req()
        nxt = self.req() if next_req is None else next_req
        self.send("COMPLETE", encoding, req=done, job_id=job["job_id"],
                  generation=job["generation"], result_ref=result_ref,
                  next=[{"req": nxt, "max_jobs": max_jobs, "wait_ms": wait_ms}])
        return done, nxt

    def claim_one(self, encoding, what, wait_ms=5000):
        req = self.send("CLAIM", encoding, max_jobs=1, wait_ms=wait_ms)
        r = self.expect("ASSIGNED", req, encoding, what)
        return r["jobs"][0] if r is not None and r["jobs"] else None


# ---- the situations ----

def sessions(kit, enc):
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-a")
    c = kit.connect(me)
    req = c.send("CLAIM", enc, max_jobs=1, wait_ms=0)
    c.expect_error("no_session", req, enc, f"[{enc}] CLAIM before HELLO")
    if kit.curve:
        welcome = c.hello(me, enc, f"[{enc}] HELLO naming another org_id (CURVE)", org=999_999)
    else:
        req = c.send("HELLO", enc, worker_id=me["name"], org_id=0)
        c.expect_error("invalid", req, enc, f"[{enc}] HELLO with org_id 0 in plaintext")
        welcome = c.hello(me, enc, f"[{enc}] HELLO")
    if welcome is not None:
        kit.check(f"[{enc}] WELCOME echoes req", welcome["req"] == (2 if kit.curve else 3),
                  str(welcome["req"]))
    req = c.send("CLAIM", enc, max_jobs=1, wait_ms=0)
    r = c.expect("NO_WORK", req, enc, f"[{enc}] CLAIM with no pending jobs")
    if r is not None:
        kit.check(f"[{enc}] NO_WORK reason 'no pending jobs'", r["reason"] == "no pending jobs",
                  r["reason"])
    started = time.monotonic()
    req = c.send("CLAIM", enc, max_jobs=1, wait_ms=300)
    r = c.expect("NO_WORK", req, enc, f"[{enc}] CLAIM waiting 300 ms")
    if r is not None:
        kit.check(f"[{enc}] a long poll waits its wait_ms", time.monotonic() - started >= 0.25)
        kit.check(f"[{enc}] NO_WORK reason 'wait ended'", r["reason"] == "wait ended", r["reason"])
    # Pipelining: replies matched by req.
    reqs = [c.send("CLAIM", enc, max_jobs=1, wait_ms=0) for _ in range(3)]
    for q in reversed(reqs):
        c.expect("NO_WORK", q, enc, f"[{enc}] pipelined CLAIM {q}")
    if enc == "json":
        # Protocol 1.1: HELLO may name the queues the worker serves (an optional member).
        req = c.send("HELLO", enc, worker_id=me["name"], org_id=me["org"], queues=["kit-skill"])
        c.expect("WELCOME", req, enc, f"[{enc}] HELLO naming queues (1.1)")
        req = c.send("CLAIM", enc, max_jobs=1, wait_ms=0)
        c.expect("NO_WORK", req, enc, f"[{enc}] CLAIM from a queue with no jobs")
        req = c.send("HELLO", enc, worker_id=me["name"], org_id=me["org"], queues=["-not a name"])
        c.expect_error("invalid", req, enc, f"[{enc}] HELLO naming an invalid queue")
    # A second HELLO on the connection opens the session anew.
    c.hello(me, enc, f"[{enc}] second HELLO on one connection")
    c.send("BYE", enc)
    kit.check(f"[{enc}] BYE is not answered", c.silent(300))
    req = c.send("CLAIM", enc, max_jobs=1, wait_ms=0)
    c.expect_error("no_session", req, enc, f"[{enc}] CLAIM after BYE")
    c.close()
    sessions_end_with_connection(kit, enc, me)


def sessions_end_with_connection(kit, enc, me):
    """docs/protocol.md, Sessions item 4: a session belongs to one connection and is gone when
    the connection ends, so WELCOME.sessions (reconnect_hints) stops counting it."""
    hints = {"features": ["reconnect_hints"]}
    probe = kit.connect(me)

    def count(what):
        w = probe.hello(me, enc, what, **hints)
        return None if w is None else w.msg.get("sessions")

    # Connections the kit closed before may still be going: count once the figure holds still.
    before, settle = None, time.monotonic() + 5
    while time.monotonic() < settle:
        now = count(f"[{enc}] HELLO counting the sessions")
        if now is None or now == before:
            break
        before = now
        time.sleep(0.2)
    other = kit.connect(me)
    other.hello(me, enc, f"[{enc}] HELLO of a second connection")
    with_other = count(f"[{enc}] HELLO counting the sessions with a second connection")
    other.close()
    after = with_other
    deadline = time.monotonic() + 5
    while after is not None and with_other is not None and after >= with_other and \
            time.monotonic() < deadline:
        time.sleep(0.05)
        after = count(f"[{enc}] HELLO counting the sessions after the second one closed")
    if None not in (before, with_other, after):
        kit.check(f"[{enc}] a second connection's session is counted", with_other == before + 1,
                  f"{before} then {with_other}")
        kit.check(f"[{enc}] a closed connection's session is no longer counted (within 5 s)",
                  after < with_other, f"{before}, {with_other} with it, {after} after it closed")
    probe.close()


def lifecycle(kit, enc):
    org = kit.new_org()
    a = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-w1")
    b = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-w2")
    stranger = kit.new_identity(kit.new_org(), f"kit-{kit.run_id}-{enc}-other")
    ca, cb, cs = kit.connect(a), kit.connect(b), kit.connect(stranger)
    ca.hello(a, enc, f"[{enc}] HELLO worker 1")
    cb.hello(b, enc, f"[{enc}] HELLO worker 2")
    cs.hello(stranger, enc, f"[{enc}] HELLO worker of another organization")

    payload = f"kit {kit.run_id} \u00e9\u2713 {enc}"
    kit.enqueue(org, payload)
    req = ca.send("CLAIM", enc, max_jobs=5, wait_ms=5000)
    r = ca.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM of an enqueued job")
    if r is None:
        return
    job = r["jobs"][0]
    kit.check(f"[{enc}] ASSIGNED: one job, its payload as enqueued",
              len(r["jobs"]) == 1 and job["payload"] == payload, repr(job))
    kit.check(f"[{enc}] ASSIGNED: first claim is attempt 1, generation >= 1",
              job["attempts"] == 1 and job["generation"] >= 1, repr(job))
    kit.check(f"[{enc}] ASSIGNED: lease_ms is WELCOME's", job["lease_ms"] == kit.lease_ms)
    jid, gen = job["job_id"], job["generation"]

    req = ca.send("RENEW", enc, job_id=jid, generation=gen)
    lease = ca.expect("LEASE", req, enc, f"[{enc}] RENEW of a held job")
    if lease is not None:
        kit.check(f"[{enc}] LEASE names the job and generation",
                  (lease["job_id"], lease["generation"]) == (jid, gen))
        kit.check(f"[{enc}] LEASE pushes the deadline no earlier",
                  lease["lease_expires_at_us"] >= job["lease_expires_at_us"])

    req = cs.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref="r:x")
    cs.expect_rejected("other_organization", req, enc, f"[{enc}] COMPLETE of another org's job")
    req = cb.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref="r:x")
    cb.expect_rejected("not_assignee", req, enc, f"[{enc}] COMPLETE by another worker")
    req = cb.send("RENEW", enc, job_id=jid, generation=gen)
    r = cb.expect("REVOKED", req, enc, f"[{enc}] RENEW by another worker")
    if r is not None:
        kit.check(f"[{enc}] REVOKED reason not_assignee", r["reason"] == "not_assignee", repr(r))
    req = ca.send("COMPLETE", enc, job_id=2**62, generation=1, result_ref="r:x")
    ca.expect_rejected("unknown_job", req, enc, f"[{enc}] COMPLETE of a job that does not exist")
    req = ca.send("RENEW", enc, job_id=2**62, generation=1)
    r = ca.expect("REVOKED", req, enc, f"[{enc}] RENEW of a job that does not exist")
    if r is not None:
        kit.check(f"[{enc}] REVOKED reason unknown_job", r["reason"] == "unknown_job")

    ref = f"review:{a['name']}:{jid}:{gen}"
    req = ca.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref=ref)
    r = ca.expect("ACCEPTED", req, enc, f"[{enc}] COMPLETE of a held job")
    if r is not None:
        kit.check(f"[{enc}] ACCEPTED completed, not replayed",
                  r["state"] == "completed" and r["replayed"] is False, repr(r))
    req = ca.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref=ref)
    r = ca.expect("ACCEPTED", req, enc, f"[{enc}] the same COMPLETE again")
    if r is not None:
        kit.check(f"[{enc}] ACCEPTED replayed", r["replayed"] is True and r["state"] == "completed")
    req = ca.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref=ref + ":other")
    ca.expect_rejected("already_terminal", req, enc, f"[{enc}] a different COMPLETE of a completed job")
    req = ca.send("COMPLETE", enc, job_id=jid, generation=gen - 1, result_ref=ref)
    ca.expect_rejected("stale_generation", req, enc, f"[{enc}] COMPLETE with an older generation")
    req = ca.send("RENEW", enc, job_id=jid, generation=gen)
    r = ca.expect("REVOKED", req, enc, f"[{enc}] RENEW of a completed job")
    if r is not None:
        kit.check(f"[{enc}] REVOKED reason already_terminal", r["reason"] == "already_terminal")

    # RELEASE gives the attempt back; the generation rises on the next claim, not on release.
    kit.enqueue(org, payload + " 2", max_attempts=3)
    job = ca.claim_one(enc, f"[{enc}] CLAIM of a second job")
    if job is None:
        return
    jid, gen, attempts = job["job_id"], job["generation"], job["attempts"]
    req = ca.send("RELEASE", enc, job_id=jid, generation=gen)
    r = ca.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE of a held job")
    if r is not None:
        kit.check(f"[{enc}] RELEASE leaves the job pending", r["state"] == "pending")
    req = ca.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref="r:late")
    ca.expect_rejected("lease_expired", req, enc, f"[{enc}] COMPLETE after RELEASE")
    req = ca.send("RELEASE", enc, job_id=jid, generation=gen)
    ca.expect_rejected("lease_expired", req, enc, f"[{enc}] RELEASE sent again")
    job = ca.claim_one(enc, f"[{enc}] CLAIM of the released job")
    if job is None:
        return
    kit.check(f"[{enc}] the claim after RELEASE: generation + 1, same attempt number",
              job["job_id"] == jid and job["generation"] == gen + 1 and job["attempts"] == attempts,
              repr(job))
    gen = job["generation"]
    req = ca.send("FAIL", enc, job_id=jid, generation=gen, reason="retry me", retryable=True)
    r = ca.expect("ACCEPTED", req, enc, f"[{enc}] FAIL retryable")
    if r is not None:
        kit.check(f"[{enc}] a retryable FAIL with attempts left: pending", r["state"] == "pending")
    req = ca.send("RENEW", enc, job_id=jid, generation=gen)
    r = ca.expect("REVOKED", req, enc, f"[{enc}] RENEW after FAIL")
    if r is not None:
        kit.check(f"[{enc}] REVOKED reason lease_expired", r["reason"] == "lease_expired")
    job = ca.claim_one(enc, f"[{enc}] CLAIM of the failed job")
    if job is None:
        return
    kit.check(f"[{enc}] the claim after FAIL: generation + 1, attempt + 1",
              job["generation"] == gen + 1 and job["attempts"] == attempts + 1, repr(job))
    gen = job["generation"]
    req = ca.send("FAIL", enc, job_id=jid, generation=gen, reason="", retryable=False)
    r = ca.expect("ACCEPTED", req, enc, f"[{enc}] FAIL not retryable")
    if r is not None:
        kit.check(f"[{enc}] a final FAIL: failed", r["state"] == "failed")
    req = ca.send("FAIL", enc, job_id=jid, generation=gen, reason="", retryable=False)
    r = ca.expect("ACCEPTED", req, enc, f"[{enc}] the same FAIL again")
    if r is not None:
        kit.check(f"[{enc}] ACCEPTED replayed for a repeated FAIL", r["replayed"] is True)
    req = ca.send("COMPLETE", enc, job_id=jid, generation=gen, result_ref="r:x")
    ca.expect_rejected("already_terminal", req, enc, f"[{enc}] COMPLETE of a failed job")
    accepted_states(kit, enc, org, ca, payload)

    quarantine(kit, enc, org, ca)
    reclaim(kit, enc, org, ca)
    for c in (ca, cb, cs):
        c.close()


def accepted_states(kit, enc, org, c, payload):
    """A retryable FAIL that schedules a retry after a backoff, and one that uses the last
    attempt: ACCEPTED names only the states of its field table (pending, failed)."""
    kit.enqueue(org, payload + " backoff", 3, "--backoff-base", "1h")
    job = c.claim_one(enc, f"[{enc}] CLAIM of a job with a backoff")
    if job is not None:
        req = c.send("FAIL", enc, job_id=job["job_id"], generation=job["generation"],
                     reason="retry later", retryable=True)
        r = c.expect("ACCEPTED", req, enc, f"[{enc}] FAIL retryable, retry after a backoff")
        if r is not None:
            kit.check(f"[{enc}] a retry waiting out its backoff is pending on the wire",
                      r["state"] == "pending", r["state"])
    kit.enqueue(org, payload + " last attempt", 1)
    job = c.claim_one(enc, f"[{enc}] CLAIM of a job with one attempt")
    if job is not None:
        req = c.send("FAIL", enc, job_id=job["job_id"], generation=job["generation"],
                     reason="no attempts left", retryable=True)
        r = c.expect("ACCEPTED", req, enc, f"[{enc}] FAIL retryable on the last attempt")
        if r is not None:
            kit.check(f"[{enc}] a job out of attempts is failed on the wire",
                      r["state"] == "failed", r["state"])


def quarantine(kit, enc, org, c):
    if not kit.args.dsn or not shutil.which("psql"):
        kit.skip("rejection quarantined", "needs --dsn and psql")
        return
    kit.enqueue(org, "to be quarantined")
    job = c.claim_one(enc, f"[{enc}] CLAIM of a job to quarantine")
    if job is None:
        return
    # What the recovery tool does to a contradictory row (aclaimctl recover --apply).
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", kit.args.dsn, "-c",
                    "UPDATE jobs SET state = 'quarantined', quarantined_from = state, "
                    f"quarantine_reason = 'conformance kit' WHERE id = {int(job['job_id'])}"],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    req = c.send("COMPLETE", enc, job_id=job["job_id"], generation=job["generation"], result_ref="r")
    c.expect_rejected("quarantined", req, enc, f"[{enc}] COMPLETE of a quarantined job")


def reclaim(kit, enc, org, c):
    if kit.lease_ms is None or kit.lease_ms > kit.args.max_lease_wait_ms:
        kit.skip("REVOKED reclaimed", f"lease longer than --max-lease-wait-ms")
        return
    kit.enqueue(org, "left to expire")
    job = c.claim_one(enc, f"[{enc}] CLAIM of a job left to expire")
    if job is None:
        return
    deadline = time.monotonic() + kit.lease_ms / 1000 + 10
    pushed = None
    while pushed is None and time.monotonic() < deadline:
        for p in c.pushes:
            if p.kind == "REVOKED" and p["job_id"] == job["job_id"]:
                pushed = p
        frames = c.receive(200)
        if frames is not None:
            try:
                kind, msg = decode_reply(frames, enc)
                if msg["req"] == 0:
                    c.pushes.append(Reply(kind, msg, frames))
            except Malformed as e:
                kit.check(f"[{enc}] pushed message matches the field tables", False, str(e))
    if kit.check(f"[{enc}] an expired lease is pushed REVOKED with req 0", pushed is not None):
        kit.check(f"[{enc}] pushed REVOKED reason reclaimed",
                  pushed["reason"] == "reclaimed" and pushed["generation"] == job["generation"],
                  repr(pushed))
        kit.reasons_seen.add("reclaimed")
    req = c.send("COMPLETE", enc, job_id=job["job_id"], generation=job["generation"], result_ref="r")
    c.expect_rejected("lease_expired", req, enc, f"[{enc}] COMPLETE after the lease was reclaimed")


def errors(kit, enc):
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-err")
    c = kit.connect(me)
    welcome = c.hello(me, enc, f"[{enc}] HELLO for the error checks")
    tag = TAG_JSON if enc == "json" else TAG_BINARY
    max_body = welcome["max_body_bytes"] if welcome else 65536

    def err(code, frames, what, req=0, reply_enc=enc):
        c.send_raw(frames)
        r = c.expect_error(code, req, reply_enc, what)
        if r is not None:
            kit.check(f"{what}: text within 1024 bytes of UTF-8",
                      0 < len(r["text"].encode("utf-8")) <= MAX_TEXT)
        return r

    for n in (1, 2, 4, 100):
        frames = [tag] + [b"CLAIM"] * (n - 1)
        r = err("malformed", frames[:n], f"[{enc}] {n} frames")
        if r is not None:
            kit.check(f"[{enc}] malformed text counts {n} frames", r["text"].endswith(f" {n}"),
                      r["text"])
    body = encode_json({"req": 1, "max_jobs": 1, "wait_ms": 0}) if enc == "json" else \
        encode_binary("CLAIM", {"req": 1, "max_jobs": 1, "wait_ms": 0})
    suffix = b"+json" if enc == "json" else b""
    for bad in (b"ACLAIM/2" + suffix, b"NOPE" + suffix, b"ACLAIM/1+xml", b"ACLAIM/\xff\xfe" + suffix):
        reply_enc = "json" if bad.endswith(b"+json") else "binary"
        err("wrong_version", [bad, b"CLAIM", body], f"[{enc}] tag {bad!r}", reply_enc=reply_enc)
    for bad in (b"claim", b"STEAL", b"\xc3(", b""):
        err("unknown_type", [tag, bad, body], f"[{enc}] type {bad!r}")
    # Sent to the coordinator, a coordinator -> worker message is invalid.
    welcome_body = encode_json({"req": 5, "org_id": 1, "lease_ms": 1, "heartbeat_ms": 1,
                                "max_body_bytes": 1}) if enc == "json" else \
        encode_binary("WELCOME", {"req": 5, "org_id": 1, "lease_ms": 1, "heartbeat_ms": 1,
                                  "max_body_bytes": 1})
    err("invalid", [tag, b"WELCOME", welcome_body], f"[{enc}] WELCOME sent to the coordinator", req=5)
    # docs/protocol.md, "Which error, in which order": eighteen types, nine of them requests.
    kit.check(f"[{enc}] the spec's tables: eighteen message types, nine requests",
              len(ALL_FIELDS) == 18 and len(REQUEST_FIELDS) == 9, sorted(ALL_FIELDS))
    sample = {"u64": 6, "i64": 1, "i32": 1, "u32": 1, "str": "x", "bool": True,
              "jobs": [{n: ("x" if k == "str" else 1) for n, k in JOB_FIELDS}]}
    for kind in sorted(REPLY_FIELDS):
        if kind == "WELCOME":
            continue
        msg = {n: sample[k] for n, k in REPLY_FIELDS[kind]}
        if kind == "PARKED":
            msg["token"] = "0" * 64
        body = encode_json(msg) if enc == "json" else encode_binary(kind, msg)
        err("invalid", [tag, kind.encode(), body], f"[{enc}] {kind} sent to the coordinator",
            req=6)

    # Sizes: max_body_bytes is answered by the body's own merits, one more byte is oversized.
    if enc == "json":
        at_limit = encode_json({"req": 7, "max_jobs": 1, "wait_ms": 0})
        at_limit += b" " * (max_body - len(at_limit))
    else:
        at_limit = b"\x01" + struct.pack("<Q", 7) + b"x" * (max_body - 9)
    c.send_raw([tag, b"CLAIM", at_limit])
    r = c.reply(7, enc, f"[{enc}] CLAIM body of exactly max_body_bytes")
    if r is not None:
        ok = r.kind == "NO_WORK" if enc == "json" else (r.kind == "ERROR" and r["code"] == "undecodable")
        kit.check(f"[{enc}] a body of exactly max_body_bytes is read, not refused as oversized", ok,
                  repr(r))
    if enc == "json":
        over = encode_json({"req": 8, "max_jobs": 1, "wait_ms": 0})
        over += b" " * (max_body + 1 - len(over))
    else:
        over = b"\x01" + struct.pack("<Q", 8) + b"x" * (max_body + 1 - 9)
    err("oversized", [tag, b"CLAIM", over], f"[{enc}] body of max_body_bytes + 1", req=8)
    if enc == "json":
        mib = b'{"req": 9' + b" " * (MAX_TRANSPORT - 10) + b"}"
    else:
        mib = b"\x01" + struct.pack("<Q", 9) + b"x" * (MAX_TRANSPORT - 9)
    r = err("oversized", [tag, b"CLAIM", mib], f"[{enc}] body of exactly 1 MiB", req=9)

    undecodable_json = [
        (b'{"req": 11,"max_jobs": 1}', 11, "a missing member"),
        (b'{"req": 12,"max_jobs": 1,"wait_ms": 0,"x": 1}', 12, "an unknown member"),
        (b'{"req": 13,"max_jobs": 1,"wait_ms": 0,"max_jobs": 1}', 13, "a repeated member"),
        (b'{"req": 14,"max_jobs": "1","wait_ms": 0}', 14, "a string for an int32"),
        (b'{"req": 15,"max_jobs": 1.0,"wait_ms": 0}', 15, "a fraction"),
        (b'{"req": 16,"max_jobs": 1e0,"wait_ms": 0}', 16, "an exponent"),
        (b'{"req": 17,"max_jobs": 2147483648,"wait_ms": 0}', 17, "2^31 in an int32"),
        (b'{"req": 18,"max_jobs": 1,"wait_ms": 0} x', 18, "bytes after the object"),
        (b'{"req": 19,"max_jobs": 1,"wait_ms": 0}{}', 19, "a second object"),
        (b'{"req": 20,"max_jobs": [[[[1]]]],"wait_ms": 0}', 20, "nesting deeper than 4"),
        (b'{"req": -1,"max_jobs": 1,"wait_ms": 0}', 0, "a negative req"),
        (b'{"max_jobs": 1,"wait_ms": 0', 0, "a truncated object"),
        (b'[1, 2]', 0, "an array"),
        (b'', 0, "an empty body"),
    ]
    undecodable_fail = [
        (b'{"req": 21,"job_id": 1,"generation": 1,"reason": "\\ud800","retryable": true}', 21,
         "a lone high surrogate escape"),
        (b'{"req": 22,"job_id": 1,"generation": 1,"reason": "\\udc00","retryable": true}', 22,
         "a lone low surrogate escape"),
        (b'{"req": 23,"job_id": 1,"generation": 1,"reason": "caf\xe9","retryable": true}', 23,
         "raw bytes that are not UTF-8"),
        (b'{"req": 24,"job_id": 1,"generation": 1,"reason": "a\\u0000b","retryable": true}', 24,
         "an escaped NUL"),
        (b'{"req": 25,"job_id": 1,"generation": 1,"reason": "x","retryable": 1}', 25,
         "an integer for a bool"),
    ]
    if enc == "json":
        for body, req, what in undecodable_json:
            err("undecodable", [tag, b"CLAIM", body], f"[json] CLAIM with {what}", req=req)
        for body, req, what in undecodable_fail:
            err("undecodable", [tag, b"FAIL", body], f"[json] FAIL with {what}", req=req)
        # Whitespace around the object and between tokens is allowed; members in any order.
        c.send_raw([tag, b"CLAIM", b' \r\n\t{ "wait_ms" :0 ,\n"max_jobs":1, "req":31 }\n\t '])
        c.expect("NO_WORK", 31, enc, "[json] whitespace everywhere JSON allows it, members reordered")
        c.send_raw([tag, b"FAIL", '{"req": 32,"job_id": 1,"generation": 1,"reason": "\\ud83d\\ude00 '
                    '\u00e9","retryable": false}'.encode()])
        c.expect("REJECTED", 32, enc, "[json] a surrogate pair and raw UTF-8 in a string")
    else:
        claim = encode_binary("CLAIM", {"req": 41, "max_jobs": 1, "wait_ms": 0})
        for body, req, what in [
            (claim[:-1], 41, "a truncated body"),
            (claim + b"\x00", 41, "a trailing byte"),
            (b"\x07" + claim[1:], 0, "endianness byte 0x07"),
            (b"\x01" + struct.pack("<Q", 42), 42, "only req"),
        ]:
            err("undecodable", [tag, b"CLAIM", body], f"[binary] CLAIM with {what}", req=req)
        fail = encode_binary("FAIL", {"req": 43, "job_id": 1, "generation": 1, "reason": "x",
                                      "retryable": False})
        err("undecodable", [tag, b"FAIL", fail[:-1] + b"\x02"], "[binary] FAIL with bool byte 2",
            req=43)
        big_prefix = b"\x01" + struct.pack("<Q", 44) + struct.pack("<Q", 1) * 2 + \
            struct.pack("<Q", 2**60) + b"r"
        err("undecodable", [tag, b"COMPLETE", big_prefix], "[binary] a length prefix beyond the body",
            req=44)
        # Big endian is accepted: the first byte says so.
        be = b"\x00" + struct.pack(">Qii", 45, 1, 0)
        c.send_raw([tag, b"CLAIM", be])
        c.expect("NO_WORK", 45, enc, "[binary] a big-endian CLAIM")
        # A binary string may hold any bytes, but a request's strings must be UTF-8 text.
        fail = encode_binary("FAIL", {"req": 46, "job_id": 2**62, "generation": 1,
                                      "reason": b"caf\xe9", "retryable": False})
        err("invalid", [tag, b"FAIL", fail], "[binary] a FAIL reason that is not UTF-8", req=46)

    invalid = [
        ("CLAIM", {"max_jobs": 0, "wait_ms": 0}, "max_jobs 0"),
        ("CLAIM", {"max_jobs": 101, "wait_ms": 0}, "max_jobs 101"),
        ("CLAIM", {"max_jobs": 1, "wait_ms": -1}, "wait_ms -1"),
        ("CLAIM", {"max_jobs": 1, "wait_ms": 60001}, "wait_ms 60001"),
        ("CLAIM", {"max_jobs": 2147483647, "wait_ms": 0}, "max_jobs 2^31-1"),
        ("RENEW", {"job_id": -1, "generation": 1}, "job_id -1"),
        ("RELEASE", {"job_id": 1, "generation": -1}, "generation -1"),
        ("COMPLETE", {"job_id": 1, "generation": 1, "result_ref": ""}, "an empty result_ref"),
        ("COMPLETE", {"job_id": 1, "generation": 1, "result_ref": "r" * 1025}, "result_ref 1025 bytes"),
        ("FAIL", {"job_id": 1, "generation": 1, "reason": "r" * 1025, "retryable": True},
         "reason 1025 bytes"),
        ("HELLO", {"worker_id": "", "org_id": 1}, "an empty worker_id"),
        ("HELLO", {"worker_id": "w" * 129, "org_id": 1}, "worker_id 129 bytes"),
        ("HELLO", {"worker_id": "tab\there", "org_id": 1}, "a tab in worker_id"),
        ("HELLO", {"worker_id": "caf\u00e9", "org_id": 1}, "non-ASCII worker_id"),
        ("HELLO", {"worker_id": "w", "org_id": -1}, "org_id -1"),
    ]
    for kind, fields, what in invalid:
        req = c.send(kind, enc, **fields)
        r = c.expect_error("invalid", req, enc, f"[{enc}] {kind} with {what}")
        if r is not None:
            kit.check(f"[{enc}] {kind} with {what}: text names the field",
                      any(f"'{n}'" in r["text"] for n in fields), r["text"])
    c.close()

    # One byte over 1 MiB: the transport drops the connection unanswered; ZeroMQ reconnects and
    # the next request finds no session.
    c = kit.connect(me)
    c.hello(me, enc, f"[{enc}] HELLO before a body over 1 MiB")
    if enc == "json":
        huge = b'{"req": 50' + b" " * (MAX_TRANSPORT - 10) + b"}"
    else:
        huge = b"\x01" + struct.pack("<Q", 50) + b"x" * (MAX_TRANSPORT - 8)
    c.send_raw([tag, b"CLAIM", huge])
    first = None
    deadline = time.monotonic() + 10
    while first is None and time.monotonic() < deadline:
        c.send("CLAIM", enc, max_jobs=1, wait_ms=0)
        frames = c.receive(200)
        if frames is not None:
            first = frames
    ok = False
    if first is not None:
        try:
            kind, msg = decode_reply(first, enc)
            ok = kind == "ERROR" and msg["code"] == "no_session" and msg["req"] != 50
            kit.codes_seen.add(msg.get("code"))
        except Malformed as e:
            msg = str(e)
    kit.check(f"[{enc}] a body over 1 MiB drops the connection; the next request gets no_session",
              ok, repr(first)[:200])
    c.close()


def too_many(kit, enc):
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-busy")
    c = kit.connect(me)
    c.hello(me, enc, f"[{enc}] HELLO for the outstanding-request limit")
    sent = [c.send("CLAIM", enc, max_jobs=1, wait_ms=60000) for _ in range(kit.args.max_outstanding)]
    got = None
    deadline = time.monotonic() + 10
    while got is None and time.monotonic() < deadline:
        frames = c.receive(500)
        if frames is None:
            break
        kind, msg = decode_reply(frames, enc)
        if kind == "ERROR":
            got = msg
    ok = got is not None and got["code"] == "too_many_requests" and got["req"] in sent
    if ok:
        kit.codes_seen.add("too_many_requests")
    kit.check(f"[{enc}] parked claims beyond the session's limit: too_many_requests", ok, repr(got))
    c.send("BYE", enc)
    c.close()


def features(kit, enc):
    """Protocol 1.2's negotiation: WELCOME grants only features HELLO asked for and knows, and a
    HELLO that asks for none gets a WELCOME of 1.1, without the member."""
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-feat")
    c = kit.connect(me)
    # Refused before the database: an ERROR for the completion and one for its claim.
    done, nxt = c.complete_claim(enc, {"job_id": 1, "generation": 1}, "r:x")
    c.expect_error("no_session", done, enc, f"[{enc}] COMPLETE+next before HELLO")
    c.expect_error("no_session", nxt, enc, f"[{enc}] COMPLETE+next before HELLO: its claim too")
    w = c.hello(me, enc, f"[{enc}] HELLO without features")
    if w is not None:
        kit.check(f"[{enc}] a HELLO without features gets a WELCOME without the member",
                  "features" not in w.msg, repr(w))
    for asked, granted, what in [
        ([FEATURE], [FEATURE], f"['{FEATURE}']"),
        (["kit-unknown-feature", FEATURE], [FEATURE], "an unknown feature and complete_claim"),
        ([RENEW_HELD], [RENEW_HELD], f"['{RENEW_HELD}'] (1.3)"),
        ([RENEW_HELD, "kit-unknown-feature", FEATURE], [RENEW_HELD, FEATURE],
         "renew_held, an unknown feature and complete_claim"),
        ([FEATURE], [FEATURE], f"['{FEATURE}'] with queues"),
    ]:
        extra = {"queues": ["default"]} if "queues" in what else {}
        w = c.hello(me, enc, f"[{enc}] HELLO asking for {what}", features=asked, **extra)
        if w is not None:
            kit.check(f"[{enc}] HELLO asking for {what}: WELCOME grants {granted}",
                      w.msg.get("features") == granted, repr(w))
    w = c.hello(me, enc, f"[{enc}] HELLO asking only for an unknown feature",
                features=["kit-unknown-feature"])
    if w is not None:
        kit.check(f"[{enc}] an unknown feature is not granted",
                  not w.msg.get("features"), repr(w))
    for names, field, what in [
        (["two words"], "features[0]", "a feature name with a space"),
        (["f" * 65], "features[0]", "a feature name of 65 bytes"),
        ([""], "features[0]", "an empty feature name"),
        ([f"f{i}" for i in range(MAX_FEATURES + 1)], "features", "17 features"),
    ]:
        req = c.send("HELLO", enc, worker_id=me["name"], org_id=org, features=names)
        r = c.expect_error("invalid", req, enc, f"[{enc}] HELLO with {what}")
        if r is not None:
            kit.check(f"[{enc}] HELLO with {what}: text names '{field}'",
                      f"'{field}'" in r["text"], r["text"])
    c.send("BYE", enc)
    c.close()


def complete_claim(kit, enc):
    """Protocol 1.2's COMPLETE that carries the next CLAIM: the completion's answer first, then
    the claim's, whatever the completion's fate; an invalid claim makes the COMPLETE invalid."""
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-cc")
    c = kit.connect(me)
    w = c.hello(me, enc, f"[{enc}] HELLO asking for complete_claim", features=[FEATURE])
    if w is None or not kit.check(f"[{enc}] complete_claim granted",
                                  w.msg.get("features") == [FEATURE], repr(w)):
        c.close()
        return
    for i in range(3):
        kit.enqueue(org, f"kit {kit.run_id} complete_claim {enc} {i}")
    first = c.claim_one(enc, f"[{enc}] CLAIM before COMPLETE+next")
    if first is None:
        c.close()
        return
    done, nxt = c.complete_claim(enc, first, f"review:{first['job_id']}")
    got = c.expect_in_order(["ACCEPTED", "ASSIGNED"], [done, nxt], enc,
                            f"[{enc}] COMPLETE+next with work pending")
    if got is None:
        c.close()
        return
    kit.check(f"[{enc}] COMPLETE+next: the job completed, one other job assigned",
              got[0]["state"] == "completed" and len(got[1]["jobs"]) == 1 and
              got[1]["jobs"][0]["job_id"] != first["job_id"], repr(got))
    second = got[1]["jobs"][0]
    stale = dict(second, generation=second["generation"] - 1)
    done, nxt = c.complete_claim(enc, stale, "review:stale")
    got = c.expect_in_order(["REJECTED", "ASSIGNED"], [done, nxt], enc,
                            f"[{enc}] a stale COMPLETE+next: the claim is still served")
    if got is None:
        c.close()
        return
    kit.check(f"[{enc}] stale COMPLETE+next: REJECTED stale_generation",
              got[0]["reason"] == "stale_generation", repr(got[0]))
    third = got[1]["jobs"][0]
    done, nxt = c.complete_claim(enc, second, f"review:{second['job_id']}")
    got = c.expect_in_order(["ACCEPTED", "NO_WORK"], [done, nxt], enc,
                            f"[{enc}] COMPLETE+next with nothing left")
    if got is not None:
        kit.check(f"[{enc}] COMPLETE+next with nothing left: NO_WORK 'no pending jobs'",
                  got[1]["reason"] == "no pending jobs", repr(got[1]))
    started = time.monotonic()
    done, nxt = c.complete_claim(enc, third, f"review:{third['job_id']}", wait_ms=300)
    got = c.expect_in_order(["ACCEPTED", "NO_WORK"], [done, nxt], enc,
                            f"[{enc}] COMPLETE+next waiting 300 ms")
    if got is not None:
        kit.check(f"[{enc}] the carried claim long-polls its wait_ms: NO_WORK 'wait ended'",
                  got[1]["reason"] == "wait ended" and time.monotonic() - started >= 0.25,
                  repr(got[1]))
    # Each is decided as if sent alone: a COMPLETE of a released job is lease_expired even when
    # its carried claim takes that job again (rejection rule 8, not 9).
    kit.enqueue(org, f"kit {kit.run_id} complete_claim {enc} released")
    released = c.claim_one(enc, f"[{enc}] CLAIM of a job to release")
    if released is not None:
        req = c.send("RELEASE", enc, job_id=released["job_id"], generation=released["generation"])
        c.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE before COMPLETE+next")
        done, nxt = c.complete_claim(enc, released, "review:released")
        got = c.expect_in_order(["REJECTED", "ASSIGNED"], [done, nxt], enc,
                                f"[{enc}] COMPLETE+next of a released job")
        if got is not None:
            kit.check(f"[{enc}] COMPLETE+next of a released job: REJECTED lease_expired, as alone",
                      got[0]["reason"] == "lease_expired", repr(got[0]))
            again = got[1]["jobs"][0]
            kit.check(f"[{enc}] the carried claim took the released job again",
                      again["job_id"] == released["job_id"] and
                      again["generation"] > released["generation"], repr(again))
            req = c.send("RELEASE", enc, job_id=again["job_id"], generation=again["generation"])
            c.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE of the job claimed again")
    # An invalid claim makes the whole COMPLETE invalid: one ERROR, for the COMPLETE's req.
    job = {"job_id": third["job_id"], "generation": third["generation"]}
    base = {"job_id": job["job_id"], "generation": job["generation"], "result_ref": "r:x"}
    claim = {"max_jobs": 1, "wait_ms": 0}
    unanswered = []
    for next_claims, field, what in [
        ([dict(claim, req=0, max_jobs=0)], "next[0].max_jobs", "max_jobs 0"),
        ([dict(claim, req=0, max_jobs=101)], "next[0].max_jobs", "max_jobs 101"),
        ([dict(claim, req=0, wait_ms=60001)], "next[0].wait_ms", "wait_ms 60001"),
        ([dict(claim, req=0), dict(claim, req=0)], "next", "two claims"),
        ([dict(claim, req=-1)], "next[0].req", "the COMPLETE's own req"),
    ]:
        req = c.req()
        for n in next_claims:
            n["req"] = req if n["req"] == -1 else c.req()
        unanswered += [n["req"] for n in next_claims if n["req"] != req]
        c.send("COMPLETE", enc, req=req, next=next_claims, **base)
        r = c.expect_error("invalid", req, enc, f"[{enc}] COMPLETE+next with {what}")
        if r is not None:
            kit.check(f"[{enc}] COMPLETE+next with {what}: text names '{field}'",
                      f"'{field}'" in r["text"], r["text"])
    kit.check(f"[{enc}] the claims of invalid COMPLETEs are not answered",
              c.silent(300) and not any(q in c.early for q in unanswered))
    if enc == "json":
        req = c.send("COMPLETE", enc, next=[{"req": 99, "max_jobs": 1, "wait_ms": 0, "x": 1}],
                     **base)
        c.expect_error("undecodable", req, enc, "[json] COMPLETE+next with an unknown member")
    c.send("BYE", enc)
    c.close()


def complete_claim_limit(kit, enc):
    """The claim a COMPLETE carries counts as one more outstanding request of the session."""
    limit = kit.args.max_outstanding - 1
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-cclimit")
    c = kit.connect(me)
    w = c.hello(me, enc, f"[{enc}] HELLO for the limit of COMPLETE+next", features=[FEATURE])
    if w is None:
        c.close()
        return
    parked = [c.send("CLAIM", enc, max_jobs=1, wait_ms=60000) for _ in range(limit - 2)]
    unknown = {"job_id": 2**62, "generation": 1}
    done, nxt = c.complete_claim(enc, unknown, "r:x")
    c.expect_in_order(["REJECTED", "NO_WORK"], [done, nxt], enc,
                      f"[{enc}] COMPLETE+next with {limit - 2} of {limit} outstanding")
    parked.append(c.send("CLAIM", enc, max_jobs=1, wait_ms=60000))
    done, nxt = c.complete_claim(enc, unknown, "r:x")
    for q, what in ((done, "the completion"), (nxt, "its claim")):
        c.expect_error("too_many_requests", q, enc,
                       f"[{enc}] COMPLETE+next with {limit - 1} of {limit} outstanding: {what}")
    c.send("BYE", enc)
    c.close()


def curve_only(kit, enc):
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-key")
    c = kit.connect(me)
    req = c.send("HELLO", enc, worker_id=me["name"] + "-not", org_id=org)
    c.expect_error("unauthenticated", req, enc, f"[{enc}] HELLO naming a worker the key is not for")
    c.hello(me, enc, f"[{enc}] HELLO with the key's worker name")
    stranger = kit.connect(None, zmq.curve_keypair())
    stranger.send("HELLO", enc, worker_id="nobody", org_id=1)
    kit.check(f"[{enc}] a key that is not registered fails the handshake: no answer",
              stranger.silent(1000))
    stranger.close()
    kit.ctl("keys", "revoke", "--public-key", me["keys"][0].decode())
    got = None
    deadline = time.monotonic() + 15
    while got is None and time.monotonic() < deadline:
        req = c.send("CLAIM", enc, max_jobs=1, wait_ms=0)
        r = c.reply(req, enc, f"[{enc}] CLAIM while the key is being revoked")
        if r is not None and r.kind == "ERROR" and r["code"] == "key_revoked":
            got = r
        else:
            time.sleep(0.2)
    kit.check(f"[{enc}] a key revoked while connected: key_revoked", got is not None)
    req = c.send("HELLO", enc, worker_id=me["name"], org_id=org)
    c.expect_error("key_revoked", req, enc, f"[{enc}] HELLO after the key was revoked")
    c.close()


def spec_examples(kit):
    """The JSON and binary examples of docs/protocol.md, sent and read verbatim."""
    try:
        with open(kit.args.spec, encoding="utf-8") as f:
            doc = f.read()
    except OSError as e:
        kit.check("docs/protocol.md readable for its examples", False, str(e))
        return
    lines = re.findall(r"^([A-Z_]+) +(\{.*\})$", doc, re.M)
    kinds = {k for k, _ in lines}
    kit.check("the spec has a JSON example of every message type",
              kinds == set(ALL_FIELDS), str(sorted(set(ALL_FIELDS) - kinds)))
    for kind, body in lines:
        try:
            msg = decode_json(kind, body.encode())
            problems = field_ranges(kind, msg) if kind in REPLY_FIELDS else []
            kit.check(f"[spec] example {kind} matches the field tables", not problems,
                      "; ".join(problems))
        except Malformed as e:
            kit.check(f"[spec] example {kind} matches the field tables", False, str(e))
    # The first example of each request is the plain one; those that use a member of protocol
    # 1.2 (HELLO's features, COMPLETE's next) are sent on a connection of their own below.
    newer = [(k, b) for k, b in lines if k in REQUEST_FIELDS and
             any(f'"{n}"' in b for n, _ in OPTIONAL_FIELDS.get(k, []) if n != "queues")]
    # Protocol 1.3's (RENEW's held, HELLO asking for renew_held) are sent by spec_examples_1_3.
    newest = [(k, b) for k, b in newer if '"held"' in b or RENEW_HELD in b]
    newer = [e for e in newer if e not in newest]
    examples = {}
    for k, b in lines:
        if k in REQUEST_FIELDS and (k, b) not in newer:
            examples.setdefault(k, b)
    org = 42
    me = {"org": org, "name": "reviewer-7", "keys": None}
    if kit.curve:
        try:
            me = kit.new_identity(org, "reviewer-7")
        except RuntimeError as e:
            kit.check("[spec] register a key for reviewer-7", False, str(e))
            return
    if kit.args.aclaimctl:
        kit.enqueue(org, '{"doc":"a"}')
    c = kit.connect(me)
    for kind in ("HELLO", "CLAIM", "RENEW", "COMPLETE", "FAIL", "RELEASE", "BYE"):
        body = examples[kind].encode()
        c.send_raw([TAG_JSON, kind.encode(), body])
        if kind == "BYE":
            kit.check("[spec] example BYE is not answered", c.silent(300))
            continue
        req = json.loads(body)["req"]
        r = c.reply(req, "json", f"[spec] example {kind} sent verbatim", timeout_ms=35_000,
                    allowed=ANSWERS[kind] - {"ERROR"})
        if r is not None and kind == "HELLO":
            kit.check("[spec] example HELLO: WELCOME for org 42", r["org_id"] == 42, repr(r))
    c.close()
    # The binary examples: hex dumps under "Example: `CLAIM ..." and "Example: `COMPLETE ...".
    c = kit.connect(me)
    c.send("HELLO", "binary", req=100, worker_id=me["name"], org_id=org)
    c.expect("WELCOME", 100, "binary", "[spec] HELLO before the binary examples")
    for kind, length in (("CLAIM", 17), ("COMPLETE", 36)):
        m = re.search(r"Example: `" + kind + r" \{.*?\}` is (\d+) bytes:\n\n```\n(.*?)```", doc, re.S)
        if not kit.check(f"[spec] binary example {kind} found", m is not None):
            continue
        raw = bytes.fromhex("".join(re.match(r"((?:[0-9a-f]{2} )*[0-9a-f]{2})", line).group(1)
                                    .replace(" ", "") for line in m.group(2).splitlines()))
        kit.check(f"[spec] binary example {kind} is {length} bytes as stated",
                  len(raw) == length == int(m.group(1)), str(len(raw)))
        c.send_raw([TAG_BINARY, kind.encode(), raw])
        req = struct.unpack("<Q", raw[1:9])[0]
        c.reply(req, "binary", f"[spec] binary example {kind} sent verbatim",
                allowed=ANSWERS[kind] - {"ERROR"})
    c.close()
    spec_examples_1_2(kit, doc, me, newer)
    spec_examples_1_3(kit, doc, me, newest)


def spec_examples_1_2(kit, doc, me, json_examples):
    """The examples of protocol 1.2 (a HELLO asking for complete_claim, a COMPLETE carrying a
    CLAIM), JSON and binary, sent verbatim: WELCOME grants the feature, and both requests of the
    COMPLETE are answered."""
    kinds = {k for k, _ in json_examples}
    kit.check("[spec] JSON examples of HELLO with features and COMPLETE with next",
              kinds == {"HELLO", "COMPLETE"}, str(sorted(kinds)))
    binary = []
    for m in re.finditer(r"Example: `(HELLO|COMPLETE) (\{[^`]*\})` is (\d+) bytes:\n\n```\n(.*?)```",
                         doc, re.S):
        if ("features" in m.group(2) or "next" in m.group(2)) and RENEW_HELD not in m.group(2):
            raw = bytes.fromhex("".join(
                re.match(r"((?:[0-9a-f]{2} )*[0-9a-f]{2})", line).group(1).replace(" ", "")
                for line in m.group(4).splitlines()))
            kit.check(f"[spec] binary example {m.group(1)} (1.2) is {m.group(3)} bytes as stated",
                      len(raw) == int(m.group(3)), str(len(raw)))
            binary.append((m.group(1), raw))
    kit.check("[spec] binary examples of HELLO with features and COMPLETE with next",
              sorted(k for k, _ in binary) == ["COMPLETE", "HELLO"], str([k for k, _ in binary]))
    for enc, examples in (("json", [(k, b.encode()) for k, b in json_examples]),
                          ("binary", binary)):
        c = kit.connect(me)
        for kind, body in sorted(examples, key=lambda e: e[0] != "HELLO"):
            tag = TAG_JSON if enc == "json" else TAG_BINARY
            if kind == "COMPLETE" and kit.args.aclaimctl:
                kit.enqueue(me["org"], '{"doc":"b"}')  # so that its claim is answered at once
            c.send_raw([tag, kind.encode(), body])
            if kind == "HELLO":
                req = json.loads(body)["req"] if enc == "json" else struct.unpack("<Q", body[1:9])[0]
                r = c.expect("WELCOME", req, enc, f"[spec] {enc} example HELLO (1.2) sent verbatim")
                if r is not None:
                    kit.check(f"[spec] {enc} example HELLO (1.2): complete_claim granted",
                              r.msg.get("features") == [FEATURE], repr(r))
                continue
            msg = decode_json(kind, body) if enc == "json" else decode_binary(kind, body)
            c.reply(msg["req"], enc, f"[spec] {enc} example COMPLETE (1.2) sent verbatim",
                    timeout_ms=35_000, allowed=ANSWERS["COMPLETE"] - {"ERROR"})
            c.reply(msg["next"][0]["req"], enc, f"[spec] {enc} example COMPLETE (1.2): its claim",
                    timeout_ms=35_000, allowed=ANSWERS["CLAIM"] - {"ERROR"})
        c.close()


def spec_examples_1_3(kit, doc, me, json_examples):
    """The examples of protocol 1.3 (a HELLO asking for renew_held, a RENEW naming several
    jobs), JSON and binary, sent verbatim: WELCOME grants the feature, and every job the RENEW
    names is answered LEASE or REVOKED under its own req (the example's jobs are not this
    worker's: REVOKED)."""
    kinds = sorted(k for k, _ in json_examples)
    kit.check("[spec] JSON examples of HELLO asking for renew_held and RENEW with held",
              kinds == ["HELLO", "RENEW"], str(kinds))
    binary = []
    for m in re.finditer(r"Example: `RENEW (\{[^`]*\})` is (\d+) bytes:\n\n```\n(.*?)```", doc, re.S):
        if "held" in m.group(1):
            raw = bytes.fromhex("".join(
                re.match(r"((?:[0-9a-f]{2} )*[0-9a-f]{2})", line).group(1).replace(" ", "")
                for line in m.group(3).splitlines()))
            kit.check("[spec] binary example RENEW (1.3) is as long as stated",
                      len(raw) == int(m.group(2)), f"{len(raw)} bytes, {m.group(2)} stated")
            binary.append(("RENEW", raw))
    kit.check("[spec] a binary example of RENEW with held", len(binary) == 1, str(len(binary)))
    hello = [b for k, b in json_examples if k == "HELLO"]
    for enc, examples in (("json", [(k, b.encode()) for k, b in json_examples]),
                          ("binary", binary)):
        c = kit.connect(me)
        if enc == "binary" and hello:
            # The binary example is a RENEW only: the session asks in JSON, as the example does.
            c.send_raw([TAG_JSON, b"HELLO", hello[0].encode()])
            c.expect("WELCOME", json.loads(hello[0])["req"], "json",
                     "[spec] HELLO (1.3) before the binary RENEW example")
        for kind, body in sorted(examples, key=lambda e: e[0] != "HELLO"):
            tag = TAG_JSON if enc == "json" else TAG_BINARY
            c.send_raw([tag, kind.encode(), body])
            msg = decode_json(kind, body) if enc == "json" else decode_binary(kind, body)
            if kind == "HELLO":
                r = c.expect("WELCOME", msg["req"], enc, f"[spec] {enc} example HELLO (1.3) sent verbatim")
                if r is not None:
                    kit.check(f"[spec] {enc} example HELLO (1.3): renew_held granted",
                              RENEW_HELD in r.msg.get("features", []), repr(r))
                continue
            reqs = [msg["req"]] + [h["req"] for h in msg.get("held", [])]
            got = c.in_order(reqs, enc, f"[spec] {enc} example RENEW (1.3) sent verbatim")
            if got is not None:
                kit.check(f"[spec] {enc} example RENEW (1.3): each job answered LEASE or REVOKED",
                          all(r.kind in ("LEASE", "REVOKED") for r in got),
                          repr([(r.kind, r["req"]) for r in got]))
        c.close()


def renew_held_refusals(kit, enc):
    """Protocol 1.3's RENEW naming several jobs, refused as a message: a list too long, an
    entry malformed or out of range, a req used twice: one ERROR for the RENEW's req, nothing
    for the jobs it names, and the session goes on. Before HELLO, every job gets no_session."""
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-rhref")
    c = kit.connect(me)
    base = {"job_id": 2**62, "generation": 1}
    first, second = c.req(), c.req()
    req = c.send("RENEW", enc, held=[dict(base, req=first), dict(base, req=second)], **base)
    for q, what in ((req, "the RENEW"), (first, "held[0]"), (second, "held[1]")):
        c.expect_error("no_session", q, enc, f"[{enc}] RENEW with held before HELLO: {what}")
    w = c.hello(me, enc, f"[{enc}] HELLO asking for renew_held", features=[RENEW_HELD])
    if w is None:
        c.close()
        return
    kit.check(f"[{enc}] renew_held granted", w.msg.get("features") == [RENEW_HELD], repr(w))
    unanswered = []
    held = [dict(base, req=c.req()) for _ in range(MAX_HELD)]
    unanswered += [h["req"] for h in held]
    req = c.send("RENEW", enc, held=held, **base)
    r = c.expect_error("invalid", req, enc, f"[{enc}] RENEW naming {MAX_HELD + 1} jobs")
    if r is not None:
        kit.check(f"[{enc}] RENEW naming {MAX_HELD + 1} jobs: text names 'held'",
                  "'held'" in r["text"], r["text"])
    for held, field, what in [
        ([dict(base, req=c.req(), job_id=-1)], "held[0].job_id", "a negative held job_id"),
        ([dict(base, req=0)], "held[0].req", "a held req equal to the RENEW's"),
        ([dict(base, req=7_000_001), dict(base, req=7_000_001)], "held[0].req",
         "a held req used twice"),
    ]:
        req = c.req()
        for h in held:
            if h["req"] == 0:
                h["req"] = req
        unanswered += [h["req"] for h in held if h["req"] != req]
        c.send("RENEW", enc, req=req, held=held, **base)
        r = c.expect_error("invalid", req, enc, f"[{enc}] RENEW with {what}")
        if r is not None:
            kit.check(f"[{enc}] RENEW with {what}: text names '{field}'",
                      f"'{field}'" in r["text"] or field in r["text"], r["text"])
    # Malformed lists: undecodable, the RENEW's req echoed.
    req = c.req()
    if enc == "json":
        body = encode_json({"req": req, "job_id": 1, "generation": 1, "held": [{"req": req + 1}]})
        what = "a held entry without job_id and generation"
    else:
        # A count of 2 with one entry's bytes.
        body = (b"\x01" + struct.pack("<Qqq", req, 1, 1) + struct.pack("<Q", 2) +
                struct.pack("<Qqq", req + 1, 1, 1))
        what = "a held count beyond its entries"
    c.next += 1
    unanswered.append(req + 1)
    c.send_raw([TAG_JSON if enc == "json" else TAG_BINARY, b"RENEW", body])
    r = c.expect_error("undecodable", req, enc, f"[{enc}] RENEW with {what}")
    if r is not None:
        kit.check(f"[{enc}] RENEW with {what}: text names 'held'", "held" in r["text"], r["text"])
    kit.check(f"[{enc}] the jobs of refused RENEWs are not answered",
              not any(q in c.early for q in unanswered) and c.silent(300),
              str(sorted(set(unanswered) & set(c.early))))
    # Nothing else was disturbed: the session answers a RENEW with held, each job on its own.
    first = c.req()
    req = c.send("RENEW", enc, held=[{"req": first, "job_id": 2**62 + 1, "generation": 1}], **base)
    got = c.in_order([req, first], enc, f"[{enc}] RENEW with held after the refusals")
    if got is not None:
        kit.check(f"[{enc}] RENEW with held after the refusals: REVOKED unknown_job for each",
                  [(r.kind, r["reason"]) for r in got] == [("REVOKED", "unknown_job")] * 2,
                  repr(got))
    c.send("BYE", enc)
    c.close()


def renew_held(kit, enc):
    """Protocol 1.3's RENEW naming every held job: each job answered on its own under its own
    req, LEASE where the lease was extended, REVOKED with the reason where not (a stale
    generation, another organization's job), none of them affecting the others."""
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-rh")
    c = kit.connect(me)
    w = c.hello(me, enc, f"[{enc}] HELLO for RENEW with held", features=[RENEW_HELD])
    if w is None:
        c.close()
        return
    for i in range(4):
        kit.enqueue(org, f"kit {kit.run_id} renew_held {enc} {i}")
    req = c.send("CLAIM", enc, max_jobs=4, wait_ms=5000)
    r = c.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM of four jobs to hold")
    jobs = r["jobs"] if r is not None else []
    if not kit.check(f"[{enc}] four jobs held", len(jobs) == 4, str(len(jobs))):
        c.close()
        return

    def renew(named, what):
        """RENEW of `named` (job dicts), the first as the RENEW's own job; its answers by job."""
        entries = [{"req": c.req(), "job_id": j["job_id"], "generation": j["generation"]}
                   for j in named[1:]]
        head = c.send("RENEW", enc, job_id=named[0]["job_id"], generation=named[0]["generation"],
                      held=entries)
        reqs = [head] + [e["req"] for e in entries]
        got = c.in_order(reqs, enc, what)
        if got is None:
            return None
        by_req = {r["req"]: r for r in got}
        kit.check(f"{what}: one answer per job, each under its own req",
                  sorted(by_req) == sorted(reqs) and len(got) == len(reqs), repr(sorted(by_req)))
        kit.check(f"{what}: each answer names the job of its req",
                  all(by_req[q]["job_id"] == j["job_id"] for q, j in zip(reqs, named)),
                  repr(got))
        return [by_req[q] for q in reqs]

    got = renew(jobs, f"[{enc}] RENEW naming four held jobs")
    if got is not None:
        kit.check(f"[{enc}] RENEW naming four held jobs: all LEASE",
                  [r.kind for r in got] == ["LEASE"] * 4, repr(got))
    stale = dict(jobs[2], generation=jobs[2]["generation"] + 1)
    got = renew([jobs[0], jobs[1], stale, jobs[3]], f"[{enc}] RENEW with one stale generation")
    if got is not None:
        kit.check(f"[{enc}] RENEW with one stale generation: LEASE, LEASE, REVOKED, LEASE",
                  [r.kind for r in got] == ["LEASE", "LEASE", "REVOKED", "LEASE"], repr(got))
        kit.check(f"[{enc}] RENEW with one stale generation: reason stale_generation",
                  got[2]["reason"] == "stale_generation", repr(got[2]))
    # Another organization's job, held by its own worker.
    other_org = kit.new_org()
    them = kit.new_identity(other_org, f"kit-{kit.run_id}-{enc}-rh-other")
    o = kit.connect(them)
    theirs = None
    if o.hello(them, enc, f"[{enc}] HELLO of another organization's worker") is not None:
        kit.enqueue(other_org, f"kit {kit.run_id} renew_held other {enc}")
        theirs = o.claim_one(enc, f"[{enc}] another organization's worker claims a job")
    if theirs is not None:
        got = renew([jobs[0], theirs, jobs[1]], f"[{enc}] RENEW naming another organization's job")
        if got is not None:
            kit.check(f"[{enc}] RENEW naming another organization's job: LEASE, REVOKED, LEASE",
                      [r.kind for r in got] == ["LEASE", "REVOKED", "LEASE"], repr(got))
            kit.check(f"[{enc}] RENEW naming another organization's job: other_organization",
                      got[1]["reason"] == "other_organization", repr(got[1]))
        req = o.send("RENEW", enc, job_id=theirs["job_id"], generation=theirs["generation"])
        o.expect("LEASE", req, enc, f"[{enc}] the other organization's lease is still its own")
    o.send("BYE", enc)
    o.close()
    for j in jobs:
        req = c.send("RELEASE", enc, job_id=j["job_id"], generation=j["generation"])
        c.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE of a job renewed with held")
    c.send("BYE", enc)
    c.close()


def drain(kit):
    if not kit.args.coordinator_pid:
        kit.skip("error draining, NO_WORK draining", "needs --coordinator-pid")
        return
    enc = "json"
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-drain")
    c = kit.connect(me)
    c.hello(me, enc, "[drain] HELLO", features=[FEATURE])
    # Both enqueued before either is claimed: the leases are short, aclaimctl is not quick.
    kit.enqueue(org, "held across the drain")
    kit.enqueue(org, "completed with a claim during the drain")
    job = c.claim_one(enc, "[drain] CLAIM")
    other = c.claim_one(enc, "[drain] CLAIM of a second job")
    parked = c.send("CLAIM", enc, max_jobs=1, wait_ms=30000)
    req = c.send("RENEW", enc, job_id=job["job_id"], generation=job["generation"])
    c.expect("LEASE", req, enc, "[drain] RENEW")
    # Connected (and, under CURVE, through the handshake) before the signal.
    late_identity = kit.new_identity(org, f"kit-{kit.run_id}-late")
    late = kit.connect(late_identity)
    req = late.send("CLAIM", enc, max_jobs=1, wait_ms=0)
    late.expect_error("no_session", req, enc, "[drain] a second connection before the signal")
    os.kill(kit.args.coordinator_pid, signal.SIGTERM)
    r = c.expect("NO_WORK", parked, enc, "[drain] a parked CLAIM after SIGTERM")
    if r is not None:
        kit.check("[drain] NO_WORK reason draining", r["reason"] == "draining")
    req = c.send("COMPLETE", enc, job_id=job["job_id"], generation=job["generation"], result_ref="r")
    # Sent at once, before the drain can end: the completion is served, the claim it carries
    # gets what a CLAIM gets (possibly before the completion's answer).
    done, nxt = c.complete_claim(enc, other, "r", wait_ms=1000) if other else (None, None)
    hello = late.send("HELLO", enc, worker_id=late_identity["name"], org_id=org)
    r = c.expect("ACCEPTED", req, enc, "[drain] COMPLETE sent during the drain")
    if r is not None:
        kit.check("[drain] the job is completed", r["state"] == "completed")
    if done is not None:
        r = c.expect("NO_WORK", nxt, enc, "[drain] the claim of a COMPLETE+next during the drain")
        if r is not None:
            kit.check("[drain] the carried claim: NO_WORK reason draining",
                      r["reason"] == "draining", repr(r))
        r = c.expect("ACCEPTED", done, enc, "[drain] COMPLETE+next during the drain")
        if r is not None:
            kit.check("[drain] COMPLETE+next during the drain: the job is completed",
                      r["state"] == "completed", repr(r))
    late.expect_error("draining", hello, enc, "[drain] HELLO during the drain")
    late.close()
    c.close()


def progress(kit, enc):
    """Protocol 1.5's PROGRESS: granted when asked for; stored for the holder (ACCEPTED, state
    assigned); beyond its bounds ERROR invalid naming the field; after the lease is reclaimed,
    refused like the holder's completion, and the checkpoint handed to the next holder in
    ASSIGNED's resume, to a worker that asked for progress and not to one that did not."""
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-pg")
    c = kit.connect(me)
    w = c.hello(me, enc, f"[{enc}] HELLO asking for progress", features=[PROGRESS])
    if w is None or not kit.check(f"[{enc}] progress granted",
                                  w.msg.get("features") == [PROGRESS], repr(w)):
        c.close()
        return
    kit.enqueue(org, f"kit {kit.run_id} progress {enc}")
    req = c.send("CLAIM", enc, max_jobs=1, wait_ms=5000)
    a = c.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM of a job to report progress on")
    if a is None:
        c.close()
        return
    kit.check(f"[{enc}] a job nobody reported on has no resume", "resume" not in a.msg, repr(a))
    job = a["jobs"][0]
    ids = {"job_id": job["job_id"], "generation": job["generation"]}
    req = c.send("PROGRESS", enc, percent=60, note="checked the wiring", checkpoint="step=6",
                 **ids)
    r = c.expect("ACCEPTED", req, enc, f"[{enc}] PROGRESS of the holder")
    if r is not None:
        kit.check(f"[{enc}] PROGRESS accepted with state assigned", r["state"] == "assigned",
                  repr(r))
    for fields, field, what in [
        ({"percent": 101, "note": "", "checkpoint": ""}, "percent", "percent 101"),
        ({"percent": -1, "note": "", "checkpoint": ""}, "percent", "percent -1"),
        ({"percent": 10, "note": "n" * (MAX_NOTE + 1), "checkpoint": ""}, "note",
         "a note of 201 bytes"),
        ({"percent": 10, "note": "", "checkpoint": "c" * (MAX_CHECKPOINT + 1)}, "checkpoint",
         "a checkpoint of 4097 bytes"),
    ]:
        req = c.send("PROGRESS", enc, **ids, **fields)
        e = c.expect_error("invalid", req, enc, f"[{enc}] PROGRESS with {what}")
        if e is not None:
            kit.check(f"[{enc}] PROGRESS with {what}: text names '{field}'",
                      f"'{field}'" in e["text"], e["text"])
    if kit.lease_ms is None or kit.lease_ms > kit.args.max_lease_wait_ms:
        kit.skip(f"[{enc}] PROGRESS after a reclaim, ASSIGNED's resume",
                 "lease longer than --max-lease-wait-ms")
        c.close()
        return
    # Stop renewing: the lease runs out and the reaper takes the job back.
    time.sleep(kit.lease_ms / 1000 + 0.5)
    deadline = time.monotonic() + 10
    stale = None
    while time.monotonic() < deadline:
        req = c.send("PROGRESS", enc, percent=90, note="", checkpoint="step=9", **ids)
        stale = c.reply(req, enc, f"[{enc}] PROGRESS after the lease ran out",
                        allowed={"REJECTED"})
        if stale is None or stale["reason"] == "lease_expired":
            break
    if stale is not None:
        kit.check(f"[{enc}] PROGRESS after the lease ran out: REJECTED lease_expired",
                  stale["reason"] == "lease_expired", repr(stale))
    for asks in (False, True):
        other = kit.connect(me)
        other.hello(me, enc, f"[{enc}] HELLO of the next holder" +
                    (" asking for progress" if asks else ""),
                    **({"features": [PROGRESS]} if asks else {}))
        req = other.send("CLAIM", enc, max_jobs=1, wait_ms=5000)
        a = other.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM of the reclaimed job")
        if a is not None:
            resume = a.msg.get("resume")
            if asks:
                kit.check(f"[{enc}] ASSIGNED hands on the checkpoint in resume",
                          resume == [{"job_id": job["job_id"], "generation": job["generation"],
                                      "percent": 60, "note": "checked the wiring",
                                      "checkpoint": "step=6"}], repr(a))
            else:
                kit.check(f"[{enc}] ASSIGNED to a worker that did not ask has no resume",
                          resume is None, repr(a))
            # Given back for the next round (a release keeps the attempt).
            held = a["jobs"][0]
            req = other.send("RELEASE", enc, job_id=held["job_id"], generation=held["generation"])
            other.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE of the resumed job")
        other.close()
    # docs/protocol.md, Features: PROGRESS is served on a session without the grant.
    other = kit.connect(me)
    other.hello(me, enc, f"[{enc}] HELLO of a holder that does not ask for progress")
    held = other.claim_one(enc, f"[{enc}] CLAIM of the job once more")
    if held is not None:
        req = other.send("PROGRESS", enc, percent=70, note="", checkpoint="step=7",
                         job_id=held["job_id"], generation=held["generation"])
        r = other.expect("ACCEPTED", req, enc, f"[{enc}] PROGRESS on a session not granted progress")
        if r is not None:
            kit.check(f"[{enc}] PROGRESS without the grant: state assigned",
                      r["state"] == "assigned", repr(r))
        req = other.send("RELEASE", enc, job_id=held["job_id"], generation=held["generation"])
        other.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE of the job reported on")
    other.close()
    req = c.send("PROGRESS", enc, percent=95, note="", checkpoint="", **ids)
    c.expect_rejected("stale_generation", req, enc, f"[{enc}] PROGRESS of a stale generation")
    c.close()


def workflow(kit, enc):
    """A job enqueued with depends_on (docs/integration.md, "Workflows"; no message changed) is
    not assigned while its dependency runs, nor after a stale completion of it; it arrives in
    ASSIGNED like any other job once the dependency's completion is accepted."""
    org = kit.new_org()
    w = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-workflow")
    c = kit.connect(w)
    c.hello(w, enc, f"[{enc}] HELLO for a workflow")
    dependency = int(kit.ctl("enqueue", "--org", str(org), "--ids",
                             f"kit {kit.run_id} inspection {enc}").split()[0])
    dependent = int(kit.ctl("enqueue", "--org", str(org), "--ids", "--depends-on",
                            str(dependency), f"kit {kit.run_id} approval {enc}").split()[0])
    req = c.send("CLAIM", enc, max_jobs=5, wait_ms=5000)
    r = c.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM while a dependency is pending")
    if r is None:
        c.close()
        return
    kit.check(f"[{enc}] ASSIGNED: the dependency only, not the job that waits for it",
              [j["job_id"] for j in r["jobs"]] == [dependency], repr(r["jobs"]))
    first = r["jobs"][0]["generation"]
    # The dependency taken back and claimed again: its first generation is stale from then on.
    req = c.send("RELEASE", enc, job_id=dependency, generation=first)
    c.expect("ACCEPTED", req, enc, f"[{enc}] RELEASE of the dependency")
    job = c.claim_one(enc, f"[{enc}] CLAIM of the released dependency")
    if job is None or job["job_id"] != dependency:
        kit.check(f"[{enc}] the released dependency is claimed again", False, repr(job))
        c.close()
        return
    req = c.send("COMPLETE", enc, job_id=dependency, generation=first, result_ref="r:stale")
    c.expect_rejected("stale_generation", req, enc,
                      f"[{enc}] COMPLETE of the dependency with its stale generation")
    req = c.send("CLAIM", enc, max_jobs=5, wait_ms=300)
    c.expect("NO_WORK", req, enc,
             f"[{enc}] CLAIM after the stale completion: the dependent is still not assigned")
    req = c.send("COMPLETE", enc, job_id=dependency, generation=job["generation"],
                 result_ref="r:dependency")
    c.expect("ACCEPTED", req, enc, f"[{enc}] COMPLETE of the dependency")
    req = c.send("CLAIM", enc, max_jobs=5, wait_ms=5000)
    r = c.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM after the dependency completed")
    if r is not None:
        kit.check(f"[{enc}] ASSIGNED: the dependent, at attempt 1",
                  [(j["job_id"], j["attempts"]) for j in r["jobs"]] == [(dependent, 1)],
                  repr(r["jobs"]))
        req = c.send("COMPLETE", enc, job_id=dependent, generation=r["jobs"][0]["generation"],
                     result_ref="r:dependent")
        c.expect("ACCEPTED", req, enc, f"[{enc}] COMPLETE of the dependent")
    c.close()


def exclusions(kit, enc):
    """Separation of duties (docs/integration.md; no message changed): a job that excludes a
    reviewer is never in that reviewer's ASSIGNED, which is NO_WORK while the job waits for
    another, and a job that excludes the completer of another goes to nobody until that one ends,
    then to anybody but its completer. The reviewer is the session's identity: under CURVE the
    key's registered name, in plaintext the worker_id HELLO gave."""
    org = kit.new_org()
    first = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-four-eyes-1")
    second = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-four-eyes-2")
    a, b = kit.connect(first), kit.connect(second)
    a.hello(first, enc, f"[{enc}] HELLO of the first reviewer")
    b.hello(second, enc, f"[{enc}] HELLO of the second reviewer")
    named = int(kit.ctl("enqueue", "--org", str(org), "--ids", "--exclude-keys", first["name"],
                        f"kit {kit.run_id} not for the first {enc}").split()[0])
    req = a.send("CLAIM", enc, max_jobs=5, wait_ms=300)
    a.expect("NO_WORK", req, enc, f"[{enc}] CLAIM of the reviewer the only job excludes")
    job = b.claim_one(enc, f"[{enc}] CLAIM of another reviewer")
    if not kit.check(f"[{enc}] ASSIGNED: the job to the reviewer it does not exclude",
                     job is not None and job["job_id"] == named, repr(job)):
        a.close()
        b.close()
        return
    req = b.send("COMPLETE", enc, job_id=named, generation=job["generation"], result_ref="r:1")
    b.expect("ACCEPTED", req, enc, f"[{enc}] COMPLETE by the reviewer not excluded")
    # Four eyes: the approval goes to nobody while the inspection runs, then not to its completer.
    inspection = int(kit.ctl("enqueue", "--org", str(org), "--ids",
                             f"kit {kit.run_id} inspection {enc}").split()[0])
    approval = int(kit.ctl("enqueue", "--org", str(org), "--ids", "--exclude-completers-of",
                           str(inspection), f"kit {kit.run_id} approval {enc}").split()[0])
    req = a.send("CLAIM", enc, max_jobs=5, wait_ms=5000)
    r = a.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM while the inspection is open")
    if r is None:
        a.close()
        b.close()
        return
    kit.check(f"[{enc}] ASSIGNED: the inspection only, not the approval that excludes its completer",
              [j["job_id"] for j in r["jobs"]] == [inspection], repr(r["jobs"]))
    req = a.send("COMPLETE", enc, job_id=inspection, generation=r["jobs"][0]["generation"],
                 result_ref="r:inspection")
    a.expect("ACCEPTED", req, enc, f"[{enc}] COMPLETE of the inspection")
    req = a.send("CLAIM", enc, max_jobs=5, wait_ms=300)
    a.expect("NO_WORK", req, enc, f"[{enc}] CLAIM of the inspection's completer: not the approval")
    job = b.claim_one(enc, f"[{enc}] CLAIM of the other reviewer after the inspection")
    if kit.check(f"[{enc}] ASSIGNED: the approval to the reviewer who did not inspect",
                 job is not None and job["job_id"] == approval, repr(job)):
        req = b.send("COMPLETE", enc, job_id=approval, generation=job["generation"],
                     result_ref="r:approval")
        b.expect("ACCEPTED", req, enc, f"[{enc}] COMPLETE of the approval")
    a.close()
    b.close()


def http_callback(kit, token, outcome, result):
    """POST /v1/callback on the coordinator's HTTP endpoint: (status, JSON body)."""
    body = json.dumps({"outcome": outcome, "result": result}).encode()
    request = urllib.request.Request(f"http://{kit.args.http}/v1/callback", data=body,
                                     method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def park(kit, enc):
    """Protocol 1.6's PARK: granted when asked for; PARKED with a token of 64 hex digits and a
    deadline for the holder; its bounds refused ERROR invalid naming the field; a stale
    generation's PARK and the holder's COMPLETE after it REJECTED; with --http, the callback
    accepted once, its replay refused 409 and a forged token 401."""
    org = kit.new_org()
    me = kit.new_identity(org, f"kit-{kit.run_id}-{enc}-park")
    c = kit.connect(me)
    w = c.hello(me, enc, f"[{enc}] HELLO asking for park", features=[PARK])
    if w is None or not kit.check(f"[{enc}] park granted", w.msg.get("features") == [PARK],
                                  repr(w)):
        c.close()
        return
    kit.enqueue(org, f"kit {kit.run_id} park {enc}")
    req = c.send("CLAIM", enc, max_jobs=1, wait_ms=5000)
    a = c.expect("ASSIGNED", req, enc, f"[{enc}] CLAIM of a job to park")
    if a is None:
        c.close()
        return
    job = a["jobs"][0]
    ids = {"job_id": job["job_id"], "generation": job["generation"]}
    for fields, field, what in [
        ({"timeout_ms": 0, "note": ""}, "timeout_ms", "timeout_ms 0"),
        ({"timeout_ms": MAX_PARK_TIMEOUT_MS + 1, "note": ""}, "timeout_ms",
         "timeout_ms over 30 days"),
        ({"timeout_ms": 1000, "note": "n" * (MAX_NOTE + 1)}, "note", "a note of 201 bytes"),
    ]:
        req = c.send("PARK", enc, **ids, **fields)
        e = c.expect_error("invalid", req, enc, f"[{enc}] PARK with {what}")
        if e is not None:
            kit.check(f"[{enc}] PARK with {what}: text names '{field}'", f"'{field}'" in e["text"],
                      e["text"])
    req = c.send("PARK", enc, job_id=job["job_id"], generation=job["generation"] + 1,
                 timeout_ms=60_000, note="")
    c.expect_rejected("stale_generation", req, enc, f"[{enc}] PARK of a generation not granted")
    before = time.time()
    req = c.send("PARK", enc, timeout_ms=60_000, note="sent to the lab", **ids)
    p = c.expect("PARKED", req, enc, f"[{enc}] PARK of the holder")
    if p is None:
        c.close()
        return
    token = p["token"]
    kit.check(f"[{enc}] PARKED carries 64 lowercase hex digits",
              len(token) == 64 and all(ch in "0123456789abcdef" for ch in token), repr(p))
    kit.check(f"[{enc}] PARKED's deadline is about the timeout away",
              abs(p["deadline_us"] / 1e6 - (before + 60)) < 30, repr(p))
    req = c.send("COMPLETE", enc, result_ref="r:holder", **ids)
    c.expect_rejected("lease_expired", req, enc, f"[{enc}] COMPLETE of the holder after PARK")
    if not kit.args.http:
        kit.skip(f"[{enc}] the callback over HTTP", "needs --http")
        c.close()
        return
    status, body = http_callback(kit, "0" * 64, "completed", "r:forged")
    kit.check(f"[{enc}] a forged token: 401 unknown_token",
              status == 401 and body.get("reason") == "unknown_token", f"{status} {body}")
    status, body = http_callback(kit, token, "completed", "r:outside")
    kit.check(f"[{enc}] the callback: 200 accepted, completed",
              status == 200 and body.get("accepted") is True and body.get("state") == "completed"
              and body.get("job_id") == job["job_id"], f"{status} {body}")
    status, body = http_callback(kit, token, "completed", "r:outside")
    kit.check(f"[{enc}] its replay: 409 replayed",
              status == 409 and body.get("reason") == "replayed", f"{status} {body}")
    req = c.send("PARK", enc, timeout_ms=60_000, note="", **ids)
    c.expect_rejected("already_terminal", req, enc, f"[{enc}] PARK of a job finished outside")
    c.close()
    # docs/protocol.md, Features: PARK is served on a session without the grant.
    c = kit.connect(me)
    c.hello(me, enc, f"[{enc}] HELLO of a holder that does not ask for park")
    kit.enqueue(org, f"kit {kit.run_id} park without the grant {enc}")
    held = c.claim_one(enc, f"[{enc}] CLAIM of a job to park without the grant")
    if held is not None:
        req = c.send("PARK", enc, job_id=held["job_id"], generation=held["generation"],
                     timeout_ms=60_000, note="")
        c.expect("PARKED", req, enc, f"[{enc}] PARK on a session not granted park")
    c.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True, help="the coordinator, e.g. tcp://127.0.0.1:5555")
    p.add_argument("--server-key",
                   help="CURVE: the coordinator's public key (Z85); write --server-key=KEY, "
                   "since a key may begin with -")
    p.add_argument("--server-key-file", help="CURVE: a file whose first line is that key")
    p.add_argument("--aclaimctl", help="aclaimctl, to enqueue jobs and register keys")
    p.add_argument("--dsn", default=os.environ.get("ACLAIM_DSN"),
                   help="the coordinator's database (default ACLAIM_DSN), for aclaimctl and for "
                        "quarantining a job")
    p.add_argument("--coordinator-pid", type=int,
                   help="send this process SIGTERM at the end to check the drain")
    p.add_argument("--http", help="the coordinator's HTTP endpoint (host:port, its --http-bind), "
                   "for the callback of a parked job (protocol 1.6)")
    p.add_argument("--max-lease-wait-ms", type=int, default=5000,
                   help="wait for a lease to expire only if WELCOME's lease_ms is at most this")
    p.add_argument("--max-outstanding", type=int, default=65,
                   help="claims to park to reach the per-session limit (the coordinator's "
                        "--max-inflight-per-session plus one)")
    p.add_argument("--spec", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "..", "docs", "protocol.md"),
                   help="docs/protocol.md, for its examples")
    args = p.parse_args()
    kit = Kit(args)
    print(f"aclaim protocol v1 conformance kit against {args.endpoint} "
          f"({'CURVE' if kit.curve else 'plaintext'})")
    started = time.monotonic()
    try:
        for enc in ("binary", "json"):
            sessions(kit, enc)
            errors(kit, enc)
            too_many(kit, enc)
            features(kit, enc)
            complete_claim_limit(kit, enc)
            renew_held_refusals(kit, enc)
            if args.aclaimctl:
                lifecycle(kit, enc)
                complete_claim(kit, enc)
                renew_held(kit, enc)
                progress(kit, enc)
                park(kit, enc)
                workflow(kit, enc)
                exclusions(kit, enc)
                if kit.curve:
                    curve_only(kit, enc)
            else:
                kit.skip(f"[{enc}] jobs, rejections, keys", "needs --aclaimctl")
        spec_examples(kit)
        drain(kit)
    except Exception as e:  # a broken situation must still end in a count
        kit.check("the kit ran to its end", False, f"{type(e).__name__}: {e}")
    expected_codes = ERROR_CODES if kit.curve else ERROR_CODES - {"unauthenticated", "key_revoked"}
    for code in sorted(expected_codes - kit.codes_seen):
        kit.skip(f"error code {code}", "no situation a client can cause without fault injection"
                 if code in ("overloaded", "database_unavailable", "database_error",
                             "not_committed", "outcome_unknown") else "not reached in this run")
    for reason in sorted((REJECTIONS | {"reclaimed"}) - kit.reasons_seen):
        kit.skip(f"reason {reason}", "not reached in this run")
    for what in kit.not_exercised:
        print(f"not exercised: {what}")
    print(f"run time {time.monotonic() - started:.1f} s")
    print(f"{kit.passed} passed, {kit.failed} failed")
    return 1 if kit.failed or kit.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

"""The aclaim wire protocol's JSON encoding (docs/protocol.md, protocol 1.6): frames, the
fields each message must carry, and the ranges a request must respect.

Only this module reads or writes frames. It checks requests before they leave, so that a bad
value is a clear ``ValueError`` in the caller's code instead of an ``ERROR invalid`` later, and
checks replies before the worker acts on them, so that a coordinator bug is a logged, ignored
message rather than a crash.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Sequence, Tuple

TAG = b"ACLAIM/1+json"
"""The tag of every request this client sends: version 1, JSON bodies."""

MAX_WORKER_ID_BYTES = 128
MAX_CLAIM_JOBS = 100
MAX_CLAIM_WAIT_MS = 60_000
MAX_RESULT_REF_BYTES = 1024
MAX_TEXT_BYTES = 1024
MAX_QUEUES = 32
MAX_TRANSPORT_BYTES = 1024 * 1024
CURVE_FRAME_OVERHEAD = 33

_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}")

FEATURE_COMPLETE_CLAIM = "complete_claim"
"""Protocol 1.2: a COMPLETE may carry the worker's next CLAIM (its member ``next``), answered
ACCEPTED (or REJECTED) and then ASSIGNED or NO_WORK. Asked for in HELLO's ``features``, used only
where WELCOME grants it."""

FEATURE_RENEW_HELD = "renew_held"
"""Protocol 1.3: one RENEW renews every job the worker holds (its member ``held``, the other
jobs each with a ``req`` of its own), each job answered LEASE or REVOKED under its own ``req``.
Asked for in HELLO's ``features``, used only where WELCOME grants it."""

MAX_HELD_RENEWALS = 1024
"""Jobs one RENEW may name: its own and at most 1023 in ``held``."""

# ERROR codes the codec answers for a message as a whole (it was not read, or a field is out of
# range): a RENEW that names several jobs then gets this one ERROR for all of them.
CODEC_ERRORS = frozenset({"malformed", "oversized", "wrong_version", "unknown_type",
                          "undecodable", "invalid"})

FEATURE_RECONNECT_HINTS = "reconnect_hints"
"""Protocol 1.4: WELCOME says how many sessions the coordinator has (``sessions``), and an ERROR
``draining`` or ``overloaded`` when to come back (``retry_after_ms``), so that a fleet spreads its
reconnections (docs/protocol.md, "Reconnecting a fleet")."""

FEATURE_PROGRESS = "progress"
"""Protocol 1.5: PROGRESS reports how far a held job is (a percentage, a note and a checkpoint),
answered ACCEPTED or REJECTED, and ASSIGNED carries the last checkpoint an earlier holder saved
(its member ``resume``), so that the next reviewer resumes from it."""

MAX_PROGRESS_NOTE_BYTES = 200
MAX_CHECKPOINT_BYTES = 4096

FEATURE_PARK = "park"
"""Protocol 1.6: PARK hands a held job to an outside system, answered PARKED with a callback token
bound to the job and its generation, which the outside system finishes the job with (SQL or the
coordinator's POST /v1/callback) before the park's deadline."""

MAX_PARK_TIMEOUT_MS = 30 * 24 * 3600 * 1000

# ERROR codes after which the same request may simply be sent again (the coordinator did not
# carry it out, or its outcome is decided by the job's row when it is re-sent).
RETRYABLE_ERRORS = frozenset({"overloaded", "database_unavailable", "database_error",
                              "too_many_requests", "not_committed", "outcome_unknown"})

# The members of every message the coordinator sends, with their JSON types. A reply that
# lacks one, or has one of another type, is not acted on.
_INT = int
_REPLY_FIELDS: Dict[str, Dict[str, type]] = {
    "WELCOME": {"req": _INT, "org_id": _INT, "lease_ms": _INT, "heartbeat_ms": _INT,
                "max_body_bytes": _INT},
    "ASSIGNED": {"req": _INT, "jobs": list},
    "NO_WORK": {"req": _INT, "reason": str},
    "LEASE": {"req": _INT, "job_id": _INT, "generation": _INT, "lease_expires_at_us": _INT,
              "lease_ms": _INT},
    "REVOKED": {"req": _INT, "job_id": _INT, "generation": _INT, "reason": str, "detail": str},
    "REJECTED": {"req": _INT, "job_id": _INT, "generation": _INT, "reason": str, "detail": str},
    "ACCEPTED": {"req": _INT, "job_id": _INT, "generation": _INT, "state": str, "replayed": bool},
    "ERROR": {"req": _INT, "code": str, "text": str},
    "PARKED": {"req": _INT, "job_id": _INT, "generation": _INT, "token": str,
               "deadline_us": _INT},
}
# Optional members (added after protocol 1.0): checked when present, ignored when absent.
# WELCOME's features (1.2) are sent only to a HELLO that named some.
# WELCOME's sessions and ERROR's retry_after_ms (1.4) only to a HELLO that asked for reconnect
# hints.
_OPTIONAL_REPLY_FIELDS: Dict[str, Dict[str, type]] = {
    "WELCOME": {"features": list, "sessions": _INT},
    "ERROR": {"retry_after_ms": _INT},
    # ASSIGNED's resume (1.5) only to a HELLO that asked for progress.
    "ASSIGNED": {"resume": list},
}
_RESUME_FIELDS: Dict[str, type] = {
    "job_id": _INT, "generation": _INT, "percent": _INT, "note": str, "checkpoint": str,
}
_ASSIGNED_JOB_FIELDS: Dict[str, type] = {
    "job_id": _INT, "generation": _INT, "lease_expires_at_us": _INT, "lease_ms": _INT,
    "attempts": _INT, "priority": _INT, "payload": str,
}


class WireError(Exception):
    """A message from the coordinator that does not follow the protocol."""


def encode(kind: str, fields: Mapping[str, Any]) -> List[bytes]:
    """The three frames of a request: tag, type, JSON body (UTF-8, non-ASCII kept raw)."""
    body = json.dumps(dict(fields), ensure_ascii=False, separators=(",", ":"))
    return [TAG, kind.encode("ascii"), body.encode("utf-8")]


def _typed(value: Any, want: type) -> bool:
    # bool is an int in Python; the protocol keeps them apart.
    if want is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, want)


def _check_members(where: str, body: Mapping[str, Any], spec: Mapping[str, type]) -> None:
    # Members beyond these are ignored: a later minor version may add optional ones.
    missing = sorted(set(spec) - set(body))
    if missing:
        raise WireError(f"{where}: missing members {missing}")
    for name, want in spec.items():
        if not _typed(body[name], want):
            raise WireError(f"{where}: member {name!r} is not of type {want.__name__}")


def decode(frames: Sequence[bytes]) -> Tuple[str, Dict[str, Any]]:
    """Reads a message from the coordinator: its type and its body as a dict."""
    if len(frames) != 3:
        raise WireError(f"expected 3 frames, got {len(frames)}")
    tag, kind_raw, body_raw = frames
    if tag != TAG:
        raise WireError(f"unexpected tag {bytes(tag)[:32]!r} (this client speaks {TAG!r})")
    kind = bytes(kind_raw).decode("ascii", errors="replace")
    spec = _REPLY_FIELDS.get(kind)
    if spec is None:
        raise WireError(f"unexpected message type {kind!r}")
    try:
        body = json.loads(bytes(body_raw).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise WireError(f"{kind} body is not UTF-8 JSON: {e}") from None
    if not isinstance(body, dict):
        raise WireError(f"{kind} body is not a JSON object")
    _check_members(kind, body, spec)
    for name, want in _OPTIONAL_REPLY_FIELDS.get(kind, {}).items():
        if name in body and not _typed(body[name], want):
            raise WireError(f"{kind}: member {name!r} is not of type {want.__name__}")
    if kind == "WELCOME" and "features" in body:
        if not all(isinstance(f, str) for f in body["features"]):
            raise WireError("WELCOME: member 'features' is not an array of strings")
    if kind == "ASSIGNED":
        for i, job in enumerate(body["jobs"]):
            if not isinstance(job, dict):
                raise WireError(f"ASSIGNED jobs[{i}] is not an object")
            _check_members(f"ASSIGNED jobs[{i}]", job, _ASSIGNED_JOB_FIELDS)
        for i, entry in enumerate(body.get("resume", ())):
            if not isinstance(entry, dict):
                raise WireError(f"ASSIGNED resume[{i}] is not an object")
            _check_members(f"ASSIGNED resume[{i}]", entry, _RESUME_FIELDS)
    return kind, body


def utf8_len(text: str) -> int:
    """Bytes of `text` in UTF-8; raises ValueError for a string that cannot be UTF-8."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ValueError(f"not valid UTF-8 text: {e}") from None


def clip_text(text: str, limit: int = MAX_TEXT_BYTES) -> str:
    """`text` cut to at most `limit` UTF-8 bytes on a character boundary, with anything that
    is not encodable replaced, so that a reason never makes a request invalid."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return data.decode("utf-8")
    return data[:limit].decode("utf-8", errors="ignore")


def check_worker_id(worker_id: str) -> str:
    """HELLO.worker_id: 1..128 bytes of printable ASCII."""
    if not isinstance(worker_id, str) or not worker_id:
        raise ValueError("worker_id must be a non-empty string")
    if len(worker_id) > MAX_WORKER_ID_BYTES or any(not " " <= c <= "~" for c in worker_id):
        raise ValueError(f"worker_id {worker_id!r} must be 1..{MAX_WORKER_ID_BYTES} characters "
                         "of printable ASCII (0x20..0x7e)")
    return worker_id


def check_queues(queues: Sequence[str]) -> List[str]:
    """HELLO.queues: at most 32 names, each 1..64 of A-Z a-z 0-9 _ . : - starting with a letter
    or digit. Empty means the coordinator's `default` queue only."""
    if isinstance(queues, str):
        raise ValueError("queues must be a list of names, not one string")
    names = list(queues)
    if len(names) > MAX_QUEUES:
        raise ValueError(f"at most {MAX_QUEUES} queues, got {len(names)}")
    for name in names:
        if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
            raise ValueError(f"queue name {name!r} must be 1..64 of A-Z a-z 0-9 _ . : - "
                             "starting with a letter or digit")
    return names


def check_result_ref(result_ref: str) -> str:
    """COMPLETE.result_ref: 1..1024 bytes of UTF-8."""
    if not isinstance(result_ref, str):
        raise TypeError(f"a result_ref must be a str, got {type(result_ref).__name__}")
    size = utf8_len(result_ref)
    if not 1 <= size <= MAX_RESULT_REF_BYTES:
        raise ValueError(f"a result_ref must be 1..{MAX_RESULT_REF_BYTES} bytes of UTF-8, "
                         f"got {size}")
    return result_ref


def check_claim(max_jobs: int, wait_ms: int) -> None:
    if not 1 <= max_jobs <= MAX_CLAIM_JOBS:
        raise ValueError(f"max_jobs must be 1..{MAX_CLAIM_JOBS}, got {max_jobs}")
    if not 0 <= wait_ms <= MAX_CLAIM_WAIT_MS:
        raise ValueError(f"claim wait must be 0..{MAX_CLAIM_WAIT_MS} ms, got {wait_ms}")


def check_progress(percent: int, note: str, checkpoint: str) -> None:
    """PROGRESS: percent 0..100, a note of at most 200 bytes and a checkpoint of at most 4096
    bytes, both UTF-8 text (an empty checkpoint keeps the one saved last)."""
    if not isinstance(percent, int) or isinstance(percent, bool) or not 0 <= percent <= 100:
        raise ValueError(f"percent must be an int 0..100, got {percent!r}")
    for name, text, limit in (("note", note, MAX_PROGRESS_NOTE_BYTES),
                              ("checkpoint", checkpoint, MAX_CHECKPOINT_BYTES)):
        if not isinstance(text, str):
            raise TypeError(f"a {name} must be a str, got {type(text).__name__}")
        size = utf8_len(text)
        if size > limit:
            raise ValueError(f"a {name} must be at most {limit} bytes of UTF-8, got {size}")


def check_park(timeout_ms: int, note: str) -> None:
    """PARK: a timeout of 1 ms .. 30 days and a note of at most 200 bytes of UTF-8."""
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or \
            not 1 <= timeout_ms <= MAX_PARK_TIMEOUT_MS:
        raise ValueError(f"a park's timeout must be 1..{MAX_PARK_TIMEOUT_MS} ms, got {timeout_ms!r}")
    if not isinstance(note, str):
        raise TypeError(f"a note must be a str, got {type(note).__name__}")
    if utf8_len(note) > MAX_PROGRESS_NOTE_BYTES:
        raise ValueError(f"a note must be at most {MAX_PROGRESS_NOTE_BYTES} bytes of UTF-8")

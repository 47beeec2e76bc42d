"""What a Link reports from poll(), and the bookkeeping of one request in flight."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Union

from ._held import JobRef
from .keys import CurveKeys
from .model import Verdict, Welcome


@dataclass
class SessionReady:
    """WELCOME arrived: the session is open (again, when `reconnected`)."""
    welcome: Welcome
    reconnected: bool


@dataclass
class JobAssigned:
    """A job granted by ASSIGNED; the link renews it until its outcome or a revocation."""
    job: Dict[str, Any]


@dataclass
class ClaimEnded:
    """A CLAIM ended without jobs: NO_WORK, an ERROR, or its reply was lost with the session."""
    why: str  # "no_work", "error" or "connection_lost"
    reason: str


@dataclass
class JobLost:
    """The worker no longer holds the job: REVOKED (pushed or in answer to RENEW), or its lease
    ran out by the worker's own clock without a renewal answered (reason "lease_lost")."""
    job: JobRef
    reason: str
    detail: str


@dataclass
class ProgressSaved:
    """The answer to a PROGRESS (protocol 1.5): stored, or refused (REJECTED with the reason a
    completion of that generation would get, or ``error:<code>``). Never re-sent: the next
    report supersedes it."""
    job: JobRef
    percent: int
    accepted: bool
    reason: str = ""
    detail: str = ""


@dataclass
class ParkAnswer:
    """The answer to a PARK (protocol 1.6): PARKED with the callback token and the deadline, or
    refused (REJECTED with the reason a completion of that generation would get, or
    ``error:<code>``)."""
    job: JobRef
    accepted: bool
    token: str = ""
    deadline_us: int = 0
    reason: str = ""
    detail: str = ""


Event = Union[SessionReady, JobAssigned, ClaimEnded, JobLost, Verdict, ProgressSaved, ParkAnswer]

LEASE_LOST = "lease_lost"

TERMINAL_OPS = {"COMPLETE": "complete", "FAIL": "fail", "RELEASE": "release"}


@dataclass
class Pending:
    kind: str
    fields: Dict[str, Any]
    sent: bool = False
    due: float = 0.0  # sent: reply expected by; not sent: send at (once ready)
    retry_delay: float = 0.0  # the pause before the next re-send after a retryable ERROR
    sends: int = 0
    # A CLAIM that goes out inside the COMPLETE before it (that COMPLETE's `next`, protocol
    # 1.2), not on its own.
    carried: bool = False
    # A RENEW that goes out inside another RENEW's `held` (protocol 1.3), not on its own; it
    # takes no place under max_in_flight, as the coordinator counts that RENEW once.
    bundled: bool = False

    def job(self) -> JobRef:
        return (self.fields["job_id"], self.fields["generation"])


@dataclass
class LinkOptions:
    endpoints: Sequence[str]
    worker_id: str
    org_id: int = 0
    queues: Sequence[str] = ()
    curve: Optional[CurveKeys] = None
    reply_timeout: float = 5.0
    backoff_first: float = 0.1
    backoff_cap: float = 5.0
    retry_delay: float = 0.2
    max_in_flight: int = 32
    # Ask for protocol 1.2's COMPLETE that carries the next CLAIM (HELLO's features); used by
    # Link.complete_then_claim() where WELCOME grants it. Off: every request goes alone, as
    # against a 1.1 coordinator.
    complete_claim: bool = True
    # Ask for protocol 1.3's RENEW that names every held job: where WELCOME grants it, one RENEW
    # per heartbeat renews them all. Off, or against an older coordinator: one RENEW per job.
    renew_held: bool = True
    # Ask for protocol 1.4's reconnect hints: WELCOME's ``sessions`` sizes the window the first
    # reconnection after a loss is spread over, and a refusal's retry_after_ms is waited out.
    reconnect_hints: bool = True
    # Ask for protocol 1.5's progress: ASSIGNED then carries the checkpoint an earlier holder of
    # a job saved, and Link.progress() is answered.
    progress: bool = True
    # Ask for protocol 1.6's park: Link.park() is answered PARKED. Off unless the worker parks.
    park: bool = False
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)



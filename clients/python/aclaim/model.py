"""The values a worker hands to user code: the job being reviewed with its cancellation, the
coordinator's verdict on an outcome, the session and the worker's counters."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple

from . import _wire
from .errors import Cancelled


@dataclass(frozen=True)
class Welcome:
    """The session a coordinator opened (WELCOME). ``features``: the protocol 1.2 features
    HELLO asked for that this coordinator granted (``complete_claim``); empty from a 1.1
    coordinator."""

    org_id: int
    lease_ms: int
    heartbeat_ms: int
    max_body_bytes: int
    endpoint: str
    features: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """The coordinator's answer to an outcome (COMPLETE, FAIL or RELEASE).

    ``accepted`` with ``state`` the job's state afterwards (``completed``, ``failed``,
    ``pending``; a retry waiting out its backoff is ``pending`` and a job out of attempts
    ``failed``, as docs/protocol.md's ACCEPTED row says) and ``replayed`` when the same outcome had already
    been committed (a re-send after a lost reply). Otherwise ``reason`` names the rejection
    (``stale_generation``, ``lease_expired``, ``cancelled``, ... as in docs/protocol.md), or
    ``error:<code>`` for an ERROR that cannot be retried, and ``detail`` explains it."""

    op: str  # "complete", "fail" or "release"
    job_id: int
    generation: int
    accepted: bool
    replayed: bool = False
    state: str = ""
    reason: str = ""
    detail: str = ""


class Cancellation:
    """Tells a handler that its job was taken away. Set at once when the coordinator revokes the
    job (an operator cancelled it, its lease was reclaimed, its run deadline passed), when the
    worker's own clock says the lease ran out without a renewal answered (``lease_lost``), and
    when the worker is stopping (``stopping``). Thread-safe."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason = ""
        self._detail = ""

    def _set(self, reason: str, detail: str = "") -> bool:
        with self._lock:
            if self._event.is_set():
                return False
            self._reason, self._detail = reason, detail
            self._event.set()
            return True

    def is_set(self) -> bool:
        return self._event.is_set()

    def __bool__(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits up to `timeout` seconds for the cancellation; True if the job was cancelled."""
        return self._event.wait(timeout)

    @property
    def reason(self) -> str:
        """``cancelled``, ``reclaimed``, ``deadline_exceeded``, ``lease_lost``, ``stopping``, or
        another reason from the coordinator's REVOKED; empty while not cancelled."""
        with self._lock:
            return self._reason

    @property
    def detail(self) -> str:
        """A person's explanation of the reason."""
        with self._lock:
            return self._detail

    def raise_if_cancelled(self) -> None:
        """Raises Cancelled with the reason once the job was taken away."""
        if self._event.is_set():
            raise Cancelled(self.reason)


@dataclass(frozen=True)
class Resume:
    """The progress an earlier holder of a job saved (protocol 1.5): resume from
    ``checkpoint``. ``generation`` is the earlier attempt's, not this one's."""

    generation: int
    percent: int
    note: str
    checkpoint: str


@dataclass(frozen=True)
class Job:
    """A job handed to the handler: what to review (``payload``), its fencing ``generation``,
    which attempt this is, and its ``cancellation``. ``resume``: the checkpoint an earlier holder
    saved (protocol 1.5), when one did and the coordinator grants ``progress``."""

    job_id: int
    generation: int
    attempts: int
    priority: int
    payload: str
    lease_ms: int
    cancellation: Cancellation = field(default_factory=Cancellation, compare=False)
    resume: Optional[Resume] = None
    _report: Optional[Callable[[int, str, str], None]] = field(default=None, compare=False,
                                                               repr=False)
    _park: Optional[Callable[[int, str], "ParkTicket"]] = field(default=None, compare=False,
                                                                repr=False)

    @property
    def cancelled(self) -> bool:
        return self.cancellation.is_set()

    def park(self, timeout: float, note: str = "") -> ParkTicket:
        """Hands the job to an outside system (protocol 1.6, on a Worker(park=True)): the job
        waits, parked, until the outside system finishes it with the returned ticket's token
        (SQL ``aclaim_finish_parked`` or the coordinator's ``POST /v1/callback``) or until
        ``timeout`` seconds pass, when the queue's retry policy applies. From the handler's
        thread; waits for the coordinator's answer. Once parked, whatever the handler returns
        is ignored: the job is no longer this worker's. Raises ParkRefused when the coordinator
        refuses (the job is then still held), ValueError for a timeout or note out of range."""
        timeout_ms = int(round(timeout * 1000))
        _wire.check_park(timeout_ms, note)
        if self._park is None:
            raise RuntimeError("this job was not handed out by a Worker")
        return self._park(timeout_ms, note)

    def progress(self, percent: int, note: str = "", checkpoint: str = "") -> None:
        """Reports how far the review is (0..100), with a note of at most 200 bytes and a
        checkpoint of at most 4 KiB of text (empty keeps the last one) that whoever holds the
        job next receives as ``job.resume``. From the handler's thread; the worker sends it and
        does not wait for the answer. A report from a holder that lost the job is refused and
        changes nothing. Raises ValueError for a value out of range."""
        _wire.check_progress(percent, note, checkpoint)
        if self._report is not None:
            self._report(percent, note, checkpoint)


@dataclass(frozen=True)
class ParkTicket:
    """What ``job.park()`` returns (protocol 1.6): the callback token to hand to the outside
    system, bound to this job and generation (64 hex digits; nobody can look it up later), and
    the park's deadline in microseconds since the epoch."""

    job_id: int
    generation: int
    token: str
    deadline_us: int


@dataclass
class WorkerStats:
    """Counters of a worker since it started. Read them from any thread."""

    claimed: int = 0
    completed: int = 0  # COMPLETE accepted
    failed: int = 0  # FAIL accepted
    released: int = 0  # RELEASE accepted
    rejected: Counter = field(default_factory=Counter)  # refused outcomes by reason
    revoked: int = 0  # REVOKED received
    lost_leases: int = 0  # leases that ran out by the worker's clock
    renewals: int = 0  # LEASE received
    progress_saved: int = 0  # PROGRESS accepted
    progress_refused: int = 0  # PROGRESS refused (REJECTED or ERROR)
    parked: int = 0  # PARK answered PARKED
    reconnects: int = 0
    resent: int = 0  # outcomes sent again after a lost reply or a retryable ERROR
    errors: int = 0  # ERROR replies received
    handler_errors: int = 0  # exceptions raised by the handler other than FailJob/ReleaseJob

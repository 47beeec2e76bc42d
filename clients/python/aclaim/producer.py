"""Producers: enqueue, cancel and read jobs inside your own transaction.

A job enqueued in a transaction that rolls back never existed, and the coordinators are woken
only when it commits::

    import psycopg2
    from aclaim.producer import Producer

    producer = Producer()                      # a producer login: its organization is its own
    with psycopg2.connect(dsn) as conn:        # commits on success, rolls back on an exception
        with conn.cursor() as cur:
            cur.execute("INSERT INTO orders (id) VALUES (%s)", (77,))
            job = producer.enqueue(cur, "inspect order 77", queue="electrical",
                                   dedupe_key="order-77")

The calls go to the SQL API (schema/definitions/functions/) (``aclaim_enqueue_many``,
``aclaim_cancel``, ``aclaim_job_status``); ``dependencies`` reads ``job_dependencies``
(schema/baseline/tables.sql), which a producer login sees for its own organization only. Errors the database raises (a payload over the limit,
another organization, bad arguments) arrive as ``psycopg2.Error`` with the server's message and
leave the transaction aborted, as any failed statement does.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union

from ._sqltime import Instant, duration_us, from_us, instant_us

Duration = Union[timedelta, float]
"""A length of time: a ``timedelta``, or seconds."""


@dataclass(frozen=True)
class NewJob:
    """A job to enqueue. Unset options take the queue's setting, then the built-in default
    (3 attempts, no backoff, no run deadline)."""

    payload: str
    queue: str = "default"
    priority: int = 0
    run_at: Optional[Instant] = None
    """Not claimable before this instant (the job is scheduled until then)."""
    delay: Optional[Duration] = None
    """Not claimable before this long from now; give ``run_at`` or ``delay``, not both."""
    dedupe_key: Optional[str] = None
    """While a job of the organization holds this key, enqueueing it again returns that job."""
    max_attempts: Optional[int] = None
    run_timeout: Optional[Duration] = None
    """The run deadline of each attempt, renewals included."""
    backoff_base: Optional[Duration] = None
    backoff_cap: Optional[Duration] = None
    depends_on: Sequence[int] = ()
    """Jobs this one waits for, of the same organization: job ids, or ``in_call(k)`` for job k
    (counting from 1) of the same ``enqueue_many``. The job is ``waiting`` until every one has
    completed; the completion of the last makes it claimable in the same transaction."""
    on_failure: str = "cancel"
    """What a dependency that fails, is discarded or is cancelled does to this job: ``cancel``
    it (and the jobs waiting for it in turn), or ``run`` it anyway."""
    exclude_keys: Sequence[str] = ()
    """Separation of duties: the reviewers (the names their keys are registered under) this job
    is never handed to."""
    exclude_completers_of: Sequence[int] = ()
    """Jobs whose completer this job is never handed to: job ids, or ``in_call(k)``. While one of
    them has not ended, nobody gets this job."""


def in_call(k: int) -> int:
    """The reference, in ``NewJob.depends_on``, to job ``k`` (counting from 1) of the same
    ``enqueue_many`` call."""
    if k < 1:
        raise ValueError(f"in_call({k}): jobs of a call count from 1")
    return -k


@dataclass(frozen=True)
class Enqueued:
    """What enqueue did with one job: ``created`` is False when a job holding its dedupe key was
    returned instead; ``state`` is ``pending``, ``scheduled`` or ``waiting`` (or the holder's
    state)."""

    id: int
    created: bool
    state: str


@dataclass(frozen=True)
class CancelledJob:
    """A job ``cancel`` ended, and the state it was in."""

    id: int
    was: str


@dataclass(frozen=True)
class Dependency:
    """One edge of a workflow: job ``job_id`` waits for ``depends_on``. ``policy`` is what a
    dependency that does not complete does (``cancel`` or ``run``); ``resolved`` how it ended
    (``completed``, ``failed``, ``discarded``, ``cancelled``), None while it has not."""

    job_id: int
    depends_on: int
    policy: str
    resolved: Optional[str]
    resolved_at: Optional[datetime]


@dataclass(frozen=True)
class JobStatus:
    """A job as its producer sees it."""

    id: int
    queue: str
    state: str
    priority: int
    attempts: int
    max_attempts: int
    dedupe_key: Optional[str]
    enqueued_at: datetime
    run_at: datetime
    finished_at: Optional[datetime]
    result_ref: Optional[str]
    last_error: Optional[str]


@contextmanager
def _cursor(target: Any) -> Iterator[Any]:
    """A cursor of the caller's connection, closed afterwards, or the caller's cursor itself."""
    if hasattr(target, "cursor"):
        with target.cursor() as cur:
            yield cur
    else:
        yield target


class Producer:
    """Enqueues, cancels and reads jobs in a transaction the caller owns: it never commits or
    rolls back. Holds no connection; one instance may serve any number of them.

    ``org`` is for a trusted login (the schema's owner): leave it unset when connecting as a
    producer login, whose organization the database takes from the login (naming another is
    refused). ``dedupe_window`` is how long a finished job still holds its dedupe key. ``clock``
    gives seconds since the epoch (``time.time`` by default); the jobs are stamped with it.
    """

    def __init__(self, org: Optional[int] = None, dedupe_window: Optional[Duration] = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.org = org
        self.dedupe_window = dedupe_window
        self.clock = clock

    def enqueue(self, target: Any, payload: str, *, queue: str = "default", priority: int = 0,
                run_at: Optional[Instant] = None, delay: Optional[Duration] = None,
                dedupe_key: Optional[str] = None, max_attempts: Optional[int] = None,
                run_timeout: Optional[Duration] = None, backoff_base: Optional[Duration] = None,
                backoff_cap: Optional[Duration] = None, depends_on: Sequence[int] = (),
                on_failure: str = "cancel", exclude_keys: Sequence[str] = (),
                exclude_completers_of: Sequence[int] = ()) -> Enqueued:
        """Enqueues one job on ``target`` (a psycopg2 connection or cursor), in its transaction.
        For a dedupe key still held, returns the holder with ``created`` False."""
        job = NewJob(payload, queue, priority, run_at, delay, dedupe_key, max_attempts,
                     run_timeout, backoff_base, backoff_cap, tuple(depends_on), on_failure,
                     tuple(exclude_keys), tuple(exclude_completers_of))
        return self.enqueue_many(target, [job])[0]

    def enqueue_many(self, target: Any, jobs: Sequence[NewJob]) -> List[Enqueued]:
        """Enqueues many jobs in one statement; results in the same order."""
        if not jobs:
            return []
        now = self.clock()
        now_us = instant_us(now)
        run_at = []
        for j in jobs:
            if j.run_at is not None and j.delay is not None:
                raise ValueError(f"job {j.payload[:40]!r}: give run_at or delay, not both")
            if j.delay is not None:
                run_at.append(now_us + duration_us(j.delay))  # type: ignore[operator]
            else:
                run_at.append(instant_us(j.run_at))
        edge_n: List[int] = []
        edge_on: List[int] = []
        edge_policy: List[str] = []
        for n, j in enumerate(jobs, start=1):
            if j.on_failure not in ("cancel", "run"):
                raise ValueError(f"job {n}: on_failure is 'cancel' or 'run', not {j.on_failure!r}")
            for dep in j.depends_on:
                edge_n.append(n)
                edge_on.append(dep)
                edge_policy.append(j.on_failure)
        excl_n: List[int] = []
        excl_key: List[Optional[str]] = []
        excl_job: List[Optional[int]] = []
        for n, j in enumerate(jobs, start=1):
            for key in j.exclude_keys:
                excl_n.append(n)
                excl_key.append(key)
                excl_job.append(None)
            for of in j.exclude_completers_of:
                excl_n.append(n)
                excl_key.append(None)
                excl_job.append(of)
        with _cursor(target) as cur:
            cur.execute(
                "SELECT n, id, created, state FROM aclaim_enqueue_many("
                "payloads => %s::text[], queues => %s::text[], priorities => %s::int[], "
                "run_at_us => %s::bigint[], dedupe_keys => %s::text[], "
                "max_attempts => %s::int[], run_timeout_us => %s::bigint[], "
                "backoff_base_us => %s::bigint[], backoff_cap_us => %s::bigint[], "
                "dedupe_window_us => %s::bigint, org => %s::bigint, now_us => %s::bigint, "
                "depends_n => %s::int[], depends_on => %s::bigint[], on_failure => %s::text[], "
                "exclude_n => %s::int[], exclude_keys => %s::text[], "
                "exclude_jobs => %s::bigint[]) "
                "ORDER BY n",
                ([j.payload for j in jobs], [j.queue for j in jobs], [j.priority for j in jobs],
                 run_at, [j.dedupe_key for j in jobs], [j.max_attempts for j in jobs],
                 [duration_us(j.run_timeout) for j in jobs],
                 [duration_us(j.backoff_base) for j in jobs],
                 [duration_us(j.backoff_cap) for j in jobs], duration_us(self.dedupe_window),
                 self.org, now_us, edge_n or None, edge_on or None, edge_policy or None,
                 excl_n or None, excl_key or None, excl_job or None))
            return [Enqueued(id=r[1], created=r[2], state=r[3]) for r in cur.fetchall()]

    def cancel(self, target: Any, job_ids: Sequence[int], reason: str) -> List[CancelledJob]:
        """Cancels the listed jobs that are pending, scheduled, waiting or assigned (a holder is told at
        once), audited with ``reason``. Jobs already finished, unknown or of another
        organization are left alone and not returned."""
        with _cursor(target) as cur:
            cur.execute("SELECT id, was FROM aclaim_cancel(%s::bigint[], %s, %s::bigint, "
                        "%s::bigint)", (list(job_ids), reason, self.org, instant_us(self.clock())))
            return [CancelledJob(id=r[0], was=r[1]) for r in cur.fetchall()]

    def dependencies(self, target: Any, job_ids: Sequence[int]) -> List[Dependency]:
        """The edges of the listed jobs both ways (what each waits for, and what waits for it),
        of the producer's organization, by dependent then dependency. With ``status`` of the
        jobs they name, a workflow's progress: a dependent waits for the edges not yet
        ``resolved``."""
        with _cursor(target) as cur:
            cur.execute(
                "SELECT job_id, depends_on, policy, resolved, aclaim_us(resolved_at) "
                "FROM job_dependencies "
                "WHERE (job_id = ANY(%s::bigint[]) OR depends_on = ANY(%s::bigint[])) "
                "AND (%s::bigint IS NULL OR org_id = %s::bigint) ORDER BY job_id, depends_on",
                (list(job_ids), list(job_ids), self.org, self.org))
            return [Dependency(job_id=r[0], depends_on=r[1], policy=r[2], resolved=r[3],
                               resolved_at=from_us(r[4])) for r in cur.fetchall()]

    def status(self, target: Any, job_ids: Sequence[int] = (),
               dedupe_keys: Sequence[str] = ()) -> List[JobStatus]:
        """The producer's organization's jobs named by id or dedupe key, in id order."""
        with _cursor(target) as cur:
            cur.execute(
                "SELECT id, queue, state, priority, attempts, max_attempts, dedupe_key, "
                "enqueued_us, run_at_us, finished_us, result_ref, last_error "
                "FROM aclaim_job_status(%s::bigint[], %s::text[], %s::bigint)",
                (list(job_ids), list(dedupe_keys), self.org))
            return [JobStatus(id=r[0], queue=r[1], state=r[2], priority=r[3], attempts=r[4],
                              max_attempts=r[5], dedupe_key=r[6], enqueued_at=from_us(r[7]),
                              run_at=from_us(r[8]), finished_at=from_us(r[9]), result_ref=r[10],
                              last_error=r[11]) for r in cur.fetchall()]

"""Result consumers: the verdicts of a consumer group, at least once until acknowledged and never
again after.

Every terminal outcome of a job (completed with its result, failed, discarded, cancelled) is
recorded in the transaction that ends the job. A consumer group is a durable cursor over them in
each organization's delivery order, which follows commit order, so an outcome whose transaction
committed late is delivered late, never skipped::

    from aclaim.consumer import ResultConsumer

    with ResultConsumer(dsn, "billing") as consumer:
        for outcome in consumer.follow():    # acknowledged when the loop asks for the next one
            bill(outcome.job_id, outcome.result_ref)

Waiting is driven by LISTEN/NOTIFY on ``aclaim_outcomes``; every wait has a deadline. A
notification only says "look again": merged notifications lose nothing.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterator, List, Optional, Union

from ._sqltime import from_us, instant_us

CHANNEL = "aclaim_outcomes"


@dataclass(frozen=True)
class JobOutcome:
    """One terminal outcome of a job, as a consumer group receives it."""

    seq: int
    """Position in the organization's delivery order: dense and increasing; what ``ack`` takes."""
    job_id: int
    outcome: str
    """``completed``, ``failed``, ``discarded`` or ``cancelled``."""
    queue: str
    generation: int
    attempts: int
    result_ref: Optional[str]
    """The reviewer's result, for ``completed``."""
    error: Optional[str]
    """Why, for the others."""
    dedupe_key: Optional[str]
    """The key the job was enqueued with: how a producer finds its own record again."""
    at: datetime
    """When the job ended."""


@dataclass(frozen=True)
class GroupStatus:
    """A consumer group's progress: every position up to ``acked`` is acknowledged; ``lag``
    counts the outcomes committed and not acknowledged yet."""

    org_id: int
    name: str
    acked: int
    head: int
    lag: int


class ResultConsumer:
    """One consumer of a group, on a connection of its own (in autocommit: each fetch and each
    acknowledgement is a short transaction of its own).

    ``org`` is for a trusted login; leave it unset when connecting as a producer login bound to
    an organization. ``create`` makes the group if it does not exist, starting at ``start``
    (``latest``: outcomes committed from now on; ``earliest``: every outcome still kept).
    ``batch`` bounds each fetch; ``statement_timeout`` (seconds) bounds every statement and
    ``connect_timeout`` the connection. Consumers of one group each see every unacknowledged
    outcome: run one at a time, or split the work by other means. Not thread-safe.
    """

    def __init__(self, dsn: str, group: str, *, org: Optional[int] = None, create: bool = True,
                 start: str = "latest", batch: int = 100, statement_timeout: float = 5.0,
                 connect_timeout: int = 10, application_name: str = "aclaim-consumer") -> None:
        if not 1 <= batch <= 10000:
            raise ValueError("batch is 1 to 10000")
        if start not in ("latest", "earliest"):
            raise ValueError("start is 'latest' or 'earliest'")
        # Imported here, so that `import aclaim` works for a reviewer without psycopg2.
        import psycopg2
        import psycopg2.extensions

        self.group = group
        self.batch = batch
        self._conn = psycopg2.connect(
            dsn, connect_timeout=connect_timeout, application_name=application_name,
            options=f"-c statement_timeout={int(statement_timeout * 1000)}")
        self._conn.set_session(isolation_level=psycopg2.extensions.ISOLATION_LEVEL_READ_COMMITTED,
                               autocommit=True)
        try:
            self.org: int = self._open(create, start, org)
        except BaseException:
            self._conn.close()
            raise

    def _open(self, create: bool, start: str, org: Optional[int]) -> int:
        """Creates or finds the group and LISTENs; returns the group's organization."""
        with self._conn.cursor() as cur:
            if create:
                cur.execute("SELECT org_id FROM aclaim_results_group_create(%s, %s, %s::bigint, "
                            "%s::bigint)", (self.group, start, org, instant_us(time.time())))
                found = cur.fetchone()[0]
            else:
                cur.execute("SELECT org_id FROM aclaim_results_groups(%s::bigint) WHERE name = %s",
                            (org, self.group))
                row = cur.fetchone()
                if row is None:
                    raise LookupError(f"no consumer group {self.group!r}")
                found = row[0]
            # Listening before the first fetch: every outcome committed after that fetch's
            # snapshot notifies this connection.
            cur.execute(f"LISTEN {CHANNEL}")
        return int(found)

    def close(self) -> None:
        """Closes the connection. What was fetched and not acknowledged comes again to the
        group's next fetch."""
        self._conn.close()

    def __enter__(self) -> "ResultConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def fetch(self) -> List[JobOutcome]:
        """The oldest outcomes the group has not acknowledged (up to ``batch``), in position
        order: the same ones again on the next call until they are acknowledged."""
        with self._conn.cursor() as cur:
            cur.execute("SELECT seq, job_id, outcome, queue, generation, attempts, result_ref, "
                        "error, dedupe_key, at_us FROM aclaim_results_fetch(%s, %s, %s::bigint)",
                        (self.group, self.batch, self.org))
            return [JobOutcome(seq=r[0], job_id=r[1], outcome=r[2], queue=r[3], generation=r[4],
                               attempts=r[5], result_ref=r[6], error=r[7], dedupe_key=r[8],
                               at=from_us(r[9]))  # type: ignore[arg-type]
                    for r in cur.fetchall()]

    def _woken(self) -> bool:
        """Takes the notifications that arrived; True when one was for this organization."""
        self._conn.poll()
        mine = False
        while self._conn.notifies:
            n = self._conn.notifies.pop(0)
            mine = mine or (n.channel == CHANNEL and n.payload == str(self.org))
        return mine

    def next(self, wait: float) -> List[JobOutcome]:
        """As ``fetch``, but when there is nothing yet, waits up to ``wait`` seconds for an
        outcome of the organization to be committed. May return an empty list at the deadline."""
        deadline = time.monotonic() + wait  # counted from the call, not from after the fetch
        self._woken()  # what arrives from here on may be newer than this fetch
        found = self.fetch()
        while not found:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # A notification that arrived since the fetch is already readable on the socket.
            select.select([self._conn], [], [], min(left, 1.0))
            if self._woken():
                found = self.fetch()
        if not found:
            # One look at the deadline in case a notification was lost with a connection: at
            # most one query per wait while nothing happens.
            found = self.fetch()
        return found

    def ack(self, upto: Union[JobOutcome, int]) -> int:
        """Acknowledges every outcome up to and including ``upto`` (an outcome or its ``seq``):
        none of them comes again, to any consumer of the group. Acknowledging again is harmless;
        a position never delivered is refused. Returns the group's cursor."""
        seq = upto.seq if isinstance(upto, JobOutcome) else int(upto)
        with self._conn.cursor() as cur:
            cur.execute("SELECT aclaim_results_ack(%s, %s, %s::bigint, %s::bigint)",
                        (self.group, seq, self.org, instant_us(time.time())))
            return cur.fetchone()[0]

    def follow(self, wait: float = 30.0, idle_exit: Optional[float] = None
               ) -> Iterator[JobOutcome]:
        """Yields outcomes as they are committed, forever (or until nothing arrived for
        ``idle_exit`` seconds). Each one is acknowledged when the loop asks for the next, so an
        outcome whose handling raised, or whose process died, comes again."""
        idle_since = time.monotonic()
        while True:
            step = wait
            if idle_exit is not None:
                left = idle_exit - (time.monotonic() - idle_since)
                if left <= 0:
                    return
                step = min(step, left)
            for outcome in self.next(step):
                yield outcome
                self.ack(outcome)
                idle_since = time.monotonic()

    def status(self) -> GroupStatus:
        """The group's cursor and lag."""
        with self._conn.cursor() as cur:
            cur.execute("SELECT org_id, name, acked, head, lag FROM aclaim_results_groups("
                        "%s::bigint) WHERE name = %s", (self.org, self.group))
            row = cur.fetchone()
        if row is None:
            raise LookupError(f"consumer group {self.group!r} no longer exists")
        return GroupStatus(*row)

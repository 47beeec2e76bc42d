"""The reviewer worker: claims jobs from aclaim coordinators and runs a handler in user code for
each, while a background I/O thread keeps every lease alive, turns a revocation into the job's
cancellation, delivers outcomes (re-sending them across reconnects), and fails over between
coordinators.

    def review(job: aclaim.Job) -> str:
        ...                                  # check job.cancellation as the review goes
        return "review:42"                   # COMPLETE with this result_ref

    aclaim.Worker(["tcp://127.0.0.1:5555"], "reviewer-1", org_id=1).run(review)

The handler returns the completion's ``result_ref``; it raises ``FailJob(reason, retryable)``
to fail the job, ``ReleaseJob()`` to give it back, ``Cancelled`` (``raise_if_cancelled()``)
after its job was taken away. Any other exception fails the job retryably, with the exception
as the reason. Up to ``concurrency`` handlers run at once, each on its own thread.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import zmq

from . import _wire
from ._events import (LEASE_LOST, ClaimEnded, Event, JobAssigned, JobLost, LinkOptions,
                      SessionReady)
from ._held import JobRef
from ._link import Link
from ._outcome import Outcome, run_handler
from .keys import CurveKeys
from .model import Job, Verdict, Welcome, WorkerStats

log = logging.getLogger("aclaim.worker")

Handler = Callable[[Job], Optional[str]]
"""Reviews one job; returns the completion's result_ref (see the module's documentation)."""

# After a CLAIM answered with ERROR (overloaded, database unavailable, ...).
_CLAIM_RETRY_PAUSE = 0.5
# After a NO_WORK that came well before its wait ended (draining, no database): no spinning.
_EARLY_NO_WORK_PAUSE = 0.2
# The loop looks at its clock at least this often, whatever the sockets do.
_MAX_POLL_WAIT = 1.0

# Posted by stop_renewing() through the outcome queue, so that only the I/O thread acts.
_STOP_RENEWING = "stop_renewing"


@dataclass
class _Active:
    job: Job
    thread: Optional[threading.Thread] = None
    finished: bool = False  # the handler returned; its outcome, if any, is with the link
    revoked: bool = False  # the coordinator took the job back (not merely our clock)
    abandoned: bool = False  # released at the stop deadline: a later outcome is dropped


class Worker:
    """A reviewer serving some queues of one organization.

    ``endpoints`` are coordinator endpoints (``tcp://host:port``), tried in turn: a session that
    is lost, or cannot be opened, moves on to the next. ``worker_id`` is the reviewer's stable
    identity (under CURVE the name its key was registered with). ``org_id`` is sent in plaintext
    development mode only; under CURVE the key decides. ``queues`` are the skills served
    (empty: ``default``). Timeouts are in seconds."""

    def __init__(self, endpoints: Union[str, Sequence[str]], worker_id: str, *,
                 org_id: int = 0, queues: Sequence[str] = (),
                 curve: Optional[CurveKeys] = None, concurrency: int = 1,
                 claim_wait: float = 1.0, reply_timeout: float = 5.0,
                 backoff_first: float = 0.1, backoff_cap: float = 5.0,
                 retry_delay: float = 0.2, stop_timeout: float = 10.0,
                 on_verdict: Optional[Callable[[Verdict], None]] = None,
                 context: Optional[zmq.Context] = None) -> None:
        endpoint_list = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if not endpoint_list or not all(isinstance(e, str) and e for e in endpoint_list):
            raise ValueError("endpoints must name at least one coordinator endpoint")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if org_id < 0:
            raise ValueError(f"org_id must not be negative, got {org_id}")
        if curve is None and org_id == 0:
            raise ValueError("in plaintext mode org_id must name the organization (>= 1)")
        for name, value in (("reply_timeout", reply_timeout), ("backoff_first", backoff_first),
                            ("retry_delay", retry_delay)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if backoff_cap < backoff_first:
            raise ValueError("backoff_cap must not be below backoff_first")
        if stop_timeout < 0:
            raise ValueError(f"stop_timeout must not be negative, got {stop_timeout}")
        self._claim_wait_ms = round(claim_wait * 1000)
        _wire.check_claim(1, self._claim_wait_ms)
        self.worker_id = _wire.check_worker_id(worker_id)
        self.concurrency = concurrency
        self.stop_timeout = stop_timeout
        self._on_verdict = on_verdict
        self._options = LinkOptions(
            endpoints=endpoint_list, worker_id=self.worker_id, org_id=org_id,
            queues=_wire.check_queues(queues), curve=curve, reply_timeout=reply_timeout,
            backoff_first=backoff_first, backoff_cap=backoff_cap, retry_delay=retry_delay,
            max_in_flight=32)
        self._context = context
        self._outcomes: "queue.SimpleQueue[Tuple[int, int, Outcome]]" = queue.SimpleQueue()
        # Handler threads, stop() and signal handlers wake the I/O thread through this pipe.
        self._wake_r: Optional[int] = None
        self._wake_w: Optional[int] = None
        # Reentrant: a signal handler runs on the main thread, perhaps while it holds the lock.
        self._lock = threading.RLock()
        self._stop_requested = False
        self._cancel_requested = False
        self._ready = threading.Event()
        self._link: Optional[Link] = None
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        self._stats = WorkerStats()
        self._handler: Optional[Handler] = None
        # By (job_id, generation): a job lost by this worker's clock may be granted to it again
        # while the first handler still runs.
        self._active: Dict[JobRef, _Active] = {}
        self._claim_not_before = 0.0
        self._claim_sent_at = 0.0

    # ---- what other threads may call ----

    @property
    def stats(self) -> WorkerStats:
        """The worker's counters (a live object; read it from any thread)."""
        return self._link.stats if self._link is not None else self._stats

    @property
    def welcome(self) -> Optional[Welcome]:
        """The current or last session, with the endpoint that serves it."""
        return self._link.welcome if self._link is not None else None

    def wait_ready(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the first session; True once one is open."""
        return self._ready.wait(timeout)

    def stop(self, cancel: bool = False, wait: bool = True,
             timeout: Optional[float] = None) -> None:
        """Stops gracefully: no new claims; running handlers get ``stop_timeout`` seconds to
        finish (with ``cancel=True`` their cancellations are set at once, reason ``stopping``);
        the jobs of handlers still running then are released; outcomes are delivered; BYE.
        With `wait` (and a worker started by start()), joins its thread and re-raises what
        ended it. Safe from any thread and from a signal handler."""
        with self._lock:
            self._stop_requested = True
            self._cancel_requested = self._cancel_requested or cancel
        self._wake()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"worker {self.worker_id} did not stop within {timeout} s")
            if self._error is not None:
                raise self._error

    def stop_renewing(self, job: Job) -> None:
        """Sends no more heartbeats for this job while its handler runs on: for rehearsing a
        stalled reviewer, whose lease the coordinator then reclaims (REVOKED ``reclaimed``).
        Safe from any thread."""
        self._outcomes.put((job.job_id, job.generation, Outcome(_STOP_RENEWING)))
        self._wake()

    def start(self, handler: Handler) -> "Worker":
        """Runs the worker on a background thread; stop() ends it."""
        if self._thread is not None:
            raise RuntimeError("this worker was started already")

        def body() -> None:
            try:
                self.run(handler, handle_signals=False)
            except BaseException as e:  # re-raised by stop()
                self._error = e
                log.error("worker=%s ended: %s", self.worker_id, e)

        self._thread = threading.Thread(target=body, name=f"aclaim-{self.worker_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wake(self) -> None:
        with self._lock:
            if self._wake_w is None:
                return  # not running (yet, or any more): nothing to wake
            try:
                os.write(self._wake_w, b"x")
            except BlockingIOError:
                pass  # the pipe is full: the loop is awake anyway

    # ---- the loop (the thread that calls run) ----

    def run(self, handler: Handler, handle_signals: bool = True) -> None:
        """Serves jobs until stop() (or SIGTERM/SIGINT, when `handle_signals` and called on the
        main thread: the first signal stops gracefully, a second one also cancels running
        handlers). Raises WorkerError when the coordinator refuses this worker for good."""
        if self._link is not None:
            raise RuntimeError("a Worker runs once; make a new one")
        context = self._context or zmq.Context.instance()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        with self._lock:
            self._wake_r, self._wake_w = wake_r, wake_w
        self._link = Link(context, self._options, wake_fd=wake_r)
        self._link.stats = self._stats
        previous = self._install_signals() if handle_signals else {}
        self._handler = handler
        try:
            self._loop()
        except BaseException:
            for a in self._active.values():
                a.job.cancellation._set("stopping", "the worker ended with an error")
            raise
        finally:
            self._link.close()
            for sig, old in previous.items():
                signal.signal(sig, old)
            with self._lock:
                self._wake_r = self._wake_w = None
            os.close(wake_r)
            os.close(wake_w)

    def _install_signals(self) -> Dict[int, object]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}

        def on_signal(signum: int, frame: object) -> None:
            self.stop(cancel=self._stop_requested, wait=False)

        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
        return previous

    def _loop(self) -> None:
        link = self._link
        assert link is not None
        link.start()
        stopping_since: Optional[float] = None
        handlers_deadline = final_deadline = 0.0
        while True:
            now = time.monotonic()
            self._take_outcomes()
            with self._lock:
                stop, cancel = self._stop_requested, self._cancel_requested
            if stop and stopping_since is None:
                stopping_since = now
                handlers_deadline = now + self.stop_timeout
                # Long enough for a claim already sent, and the releases, to be answered.
                final_deadline = (max(handlers_deadline, now + self._claim_wait_ms / 1000.0) +
                                  self._options.reply_timeout)
                log.info("worker=%s stopping: %d jobs running", self.worker_id,
                         len(self._active))
            if stopping_since is not None:
                if cancel:
                    self._cancel_running("stopping", "the worker is stopping")
                if now >= handlers_deadline:
                    self._abandon_running()
                if not self._active and link.awaiting() == 0:
                    break
                if now >= final_deadline:
                    log.warning("worker=%s stopped with %d claims or outcomes unanswered; their "
                                "jobs return to the queue when the leases run out",
                                self.worker_id, link.awaiting())
                    break
            else:
                self._maybe_claim(now)
            wait = _MAX_POLL_WAIT
            if self._claim_not_before > now:
                wait = min(wait, self._claim_not_before - now)
            if stopping_since is not None:
                next_deadline = handlers_deadline if now < handlers_deadline else final_deadline
                wait = min(wait, next_deadline - now)
            for event in link.poll(max(0.0, wait)):
                self._on_event(event)
            self._drain_wake()
        log.info("worker=%s exit: claimed=%d completed=%d failed=%d released=%d rejected=%s "
                 "revoked=%d lost_leases=%d reconnects=%d resent=%d", self.worker_id,
                 self.stats.claimed, self.stats.completed, self.stats.failed,
                 self.stats.released, dict(self.stats.rejected), self.stats.revoked,
                 self.stats.lost_leases, self.stats.reconnects, self.stats.resent)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _maybe_claim(self, now: float) -> None:
        link = self._link
        assert link is not None
        if not link.ready or link.claim_pending() or now < self._claim_not_before:
            return
        slots = self.concurrency - len(self._active)
        if slots > 0:
            link.claim(min(slots, _wire.MAX_CLAIM_JOBS), self._claim_wait_ms)
            self._claim_sent_at = now

    def _cancel_running(self, reason: str, detail: str) -> None:
        for a in self._active.values():
            if not a.finished:
                a.job.cancellation._set(reason, detail)

    def _abandon_running(self) -> None:
        """At the stop deadline: the jobs of handlers still running go back to the queue."""
        link = self._link
        assert link is not None
        for ref, a in list(self._active.items()):
            if a.finished or a.abandoned:
                continue
            a.abandoned = True
            a.job.cancellation._set("stopping", "the worker stopped; the job was released")
            log.warning("worker=%s job=%d still running at the stop deadline: %s",
                        self.worker_id, ref[0], "dropped" if a.revoked else "released")
            if a.revoked:
                del self._active[ref]  # the coordinator has it back already
            else:
                link.release(ref)  # its verdict ends the entry

    # ---- events from the link ----

    def _on_event(self, event: Event) -> None:
        if isinstance(event, JobAssigned):
            self._on_assigned(event.job)
        elif isinstance(event, JobLost):
            self._on_lost(event)
        elif isinstance(event, Verdict):
            self._on_verdict_event(event)
        elif isinstance(event, ClaimEnded):
            now = time.monotonic()
            if event.why == "error":
                log.warning("worker=%s claim failed: %s", self.worker_id, event.reason)
                self._claim_not_before = now + _CLAIM_RETRY_PAUSE
            elif event.why == "no_work" and \
                    now - self._claim_sent_at < self._claim_wait_ms / 2000.0:
                self._claim_not_before = now + _EARLY_NO_WORK_PAUSE
        elif isinstance(event, SessionReady):
            self._ready.set()

    def _on_assigned(self, fields: Dict[str, Any]) -> None:
        link = self._link
        assert link is not None
        job = Job(job_id=fields["job_id"], generation=fields["generation"],
                  attempts=fields["attempts"], priority=fields["priority"],
                  payload=fields["payload"], lease_ms=fields["lease_ms"])
        self.stats.claimed += 1
        active = _Active(job)
        self._active[(job.job_id, job.generation)] = active
        with self._lock:
            stopping = self._stop_requested
        if stopping:
            log.info("worker=%s release job=%d generation=%d: assigned while stopping",
                     self.worker_id, job.job_id, job.generation)
            active.finished = True
            link.release((job.job_id, job.generation))
            return
        log.info("worker=%s assigned job=%d generation=%d attempts=%d", self.worker_id,
                 job.job_id, job.generation, job.attempts)
        active.thread = threading.Thread(target=self._run_handler, args=(job,),
                                         name=f"aclaim-job-{job.job_id}", daemon=True)
        active.thread.start()

    def _on_lost(self, lost: JobLost) -> None:
        job_id, generation = lost.job
        a = self._active.get(lost.job)
        if a is None:
            return
        a.revoked = lost.reason != LEASE_LOST
        a.job.cancellation._set(lost.reason, lost.detail)
        log.warning("worker=%s job=%d generation=%d lost: %s (%s)", self.worker_id, job_id,
                    generation, lost.reason, lost.detail)
        if a.finished and not self._link_holds(a):
            del self._active[lost.job]  # its outcome is not in flight: nothing more will come

    def _link_holds(self, a: _Active) -> bool:
        link = self._link
        assert link is not None
        return link.held.holds((a.job.job_id, a.job.generation))

    def _on_verdict_event(self, v: Verdict) -> None:
        s = self.stats
        if v.accepted:
            if v.op == "complete":
                s.completed += 1
            elif v.op == "fail":
                s.failed += 1
            else:
                s.released += 1
            log.info("worker=%s %s job=%d generation=%d accepted state=%s%s", self.worker_id,
                     v.op, v.job_id, v.generation, v.state, " (replayed)" if v.replayed else "")
        else:
            s.rejected[v.reason] += 1
            log.warning("worker=%s %s job=%d generation=%d rejected: %s (%s)", self.worker_id,
                        v.op, v.job_id, v.generation, v.reason, v.detail)
        self._active.pop((v.job_id, v.generation), None)
        if self._on_verdict is not None:
            try:
                self._on_verdict(v)
            except Exception:
                log.exception("worker=%s on_verdict raised", self.worker_id)

    # ---- outcomes from the handler threads ----

    def _run_handler(self, job: Job) -> None:
        assert self._handler is not None
        outcome = run_handler(self._handler, job, self.worker_id)
        self._outcomes.put((job.job_id, job.generation, outcome))
        self._wake()

    def _take_outcomes(self) -> None:
        link = self._link
        assert link is not None
        while True:
            try:
                job_id, generation, outcome = self._outcomes.get_nowait()
            except queue.Empty:
                return
            kind = outcome.kind
            ref = (job_id, generation)
            a = self._active.get(ref)
            if a is None or a.abandoned:
                continue  # released at the stop deadline; whatever it says now is late
            if kind == _STOP_RENEWING:
                link.stop_renewing(job_id)
                continue
            a.finished = True
            if outcome.handler_error:
                self.stats.handler_errors += 1
            if kind == "complete":
                link.complete(ref, outcome.text)
            elif kind == "fail":
                link.fail(ref, outcome.text, outcome.retryable)
            elif kind == "release" or (kind == "cancelled" and not a.revoked):
                # Cancelled without a revocation (our clock, a stop, or the handler's own
                # decision): the coordinator may still think the job is held; give it back.
                link.release(ref)
            else:
                del self._active[ref]  # revoked and given up: nothing to send

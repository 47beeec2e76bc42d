"""The worker's I/O thread: claims while slots are free, starts a handler thread per job, hands
the link each outcome, turns the link's events into cancellations and verdicts, and carries out
the graceful stop. Everything here runs on the thread that called Worker.run, except post()."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from . import _wire
from ._events import (LEASE_LOST, ClaimEnded, Event, JobAssigned, JobLost, ParkAnswer,
                      ProgressSaved, SessionReady)
from ._held import JobRef
from ._link import Link
from ._outcome import Outcome, run_handler
from .errors import ParkRefused
from .model import Job, ParkTicket, Resume, Verdict

log = logging.getLogger("aclaim.worker")

# After a CLAIM answered with ERROR (overloaded, database unavailable, ...).
_CLAIM_RETRY_PAUSE = 0.5
# After a NO_WORK that came well before its wait ended (draining, no database): no spinning.
_EARLY_NO_WORK_PAUSE = 0.2
# The loop looks at its clock at least this often, whatever the sockets do.
_MAX_POLL_WAIT = 1.0

# Posted by Worker.stop_renewing() like an outcome, so that only the I/O thread acts.
STOP_RENEWING = "stop_renewing"
# Posted by Job.progress() (protocol 1.5): a report to send while the handler goes on.
PROGRESS = "progress"
# Posted by Job.park() (protocol 1.6): a PARK to send; the handler waits for its answer.
PARK = "park"


@dataclass
class _Active:
    job: Job
    thread: Optional[threading.Thread] = None
    finished: bool = False  # the handler returned; its outcome, if any, is with the link
    revoked: bool = False  # the coordinator took the job back (not merely our clock)
    abandoned: bool = False  # released at the stop deadline: a later outcome is dropped
    parked: bool = False  # handed to an outside system (PARKED): the handler's outcome is dropped
    # The handler waiting in Job.park(): the answer is put here by the I/O thread.
    park_answer: Optional["queue.Queue[ParkAnswer]"] = None


@dataclass(frozen=True)
class LoopSettings:
    """The Worker's settings the loop acts on (times in seconds, the claim wait in ms)."""

    worker_id: str
    concurrency: int
    claim_wait_ms: int
    stop_timeout: float
    reply_timeout: float


class Loop:
    """One worker's jobs in progress and its claim pacing; driven by run() on the I/O thread."""

    def __init__(self, link: Link, handler: Callable[[Job], Optional[str]],
                 settings: LoopSettings, stop_state: Callable[[], Tuple[bool, bool]],
                 wake: Callable[[], None], wake_fd: int,
                 on_verdict: Optional[Callable[[Verdict], None]],
                 on_ready: Callable[[], None]) -> None:
        self._link = link
        self._handler = handler
        self._s = settings
        self._stop_state = stop_state  # (stop requested, cancel requested)
        self._wake = wake
        self._wake_fd = wake_fd
        self._on_verdict = on_verdict
        self._on_ready = on_ready
        self._outcomes: "queue.SimpleQueue[Tuple[int, int, Outcome]]" = queue.SimpleQueue()
        # By (job_id, generation): a job lost by this worker's clock may be granted to it again
        # while the first handler still runs.
        self._active: Dict[JobRef, _Active] = {}
        self._claim_not_before = 0.0
        self._claim_sent_at = 0.0

    def cancel_all(self, reason: str, detail: str) -> None:
        for a in self._active.values():
            a.job.cancellation._set(reason, detail)

    def run(self) -> None:
        """Serves until the stop is complete. Raises WorkerError from the link."""
        link = self._link
        link.start()
        stopping_since: Optional[float] = None
        handlers_deadline = final_deadline = 0.0
        while True:
            now = time.monotonic()
            self._take_outcomes()
            stop, cancel = self._stop_state()
            if stop and stopping_since is None:
                stopping_since = now
                handlers_deadline = now + self._s.stop_timeout
                # Long enough for a claim already sent, and the releases, to be answered.
                final_deadline = (max(handlers_deadline, now + self._s.claim_wait_ms / 1000.0) +
                                  self._s.reply_timeout)
                log.info("worker=%s stopping: %d jobs running", self._s.worker_id,
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
                                self._s.worker_id, link.awaiting())
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
                 "revoked=%d lost_leases=%d reconnects=%d resent=%d", self._s.worker_id,
                 self._link.stats.claimed, self._link.stats.completed, self._link.stats.failed,
                 self._link.stats.released, dict(self._link.stats.rejected), self._link.stats.revoked,
                 self._link.stats.lost_leases, self._link.stats.reconnects, self._link.stats.resent)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_fd, 4096):
                pass
        except BlockingIOError:
            pass

    def _claim_slots(self, now: float, counted_twice: int = 0) -> int:
        """How many jobs a claim sent now may ask for (0: none now), with `counted_twice` jobs
        finished by their handlers but still counted until their verdicts."""
        link = self._link
        if (self._stop_state()[0] or not link.ready or link.claim_pending() or
                now < self._claim_not_before):
            return 0
        slots = self._s.concurrency - (len(self._active) - counted_twice)
        return max(0, min(slots, _wire.MAX_CLAIM_JOBS))

    def _maybe_claim(self, now: float) -> None:
        slots = self._claim_slots(now)
        if slots > 0:
            self._link.claim(slots, self._s.claim_wait_ms)
            self._claim_sent_at = now

    def _cancel_running(self, reason: str, detail: str) -> None:
        for a in self._active.values():
            if not a.finished:
                a.job.cancellation._set(reason, detail)

    def _abandon_running(self) -> None:
        """At the stop deadline: the jobs of handlers still running go back to the queue."""
        link = self._link
        for ref, a in list(self._active.items()):
            if a.finished or a.abandoned:
                continue
            a.abandoned = True
            a.job.cancellation._set("stopping", "the worker stopped; the job was released")
            log.warning("worker=%s job=%d still running at the stop deadline: %s",
                        self._s.worker_id, ref[0], "dropped" if a.revoked else "released")
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
                log.warning("worker=%s claim failed: %s", self._s.worker_id, event.reason)
                self._claim_not_before = now + _CLAIM_RETRY_PAUSE
            elif event.why == "no_work" and \
                    now - self._claim_sent_at < self._s.claim_wait_ms / 2000.0:
                self._claim_not_before = now + _EARLY_NO_WORK_PAUSE
        elif isinstance(event, ProgressSaved):
            if event.accepted:
                self._link.stats.progress_saved += 1
                log.debug("worker=%s progress job=%d generation=%d percent=%d saved",
                          self._s.worker_id, event.job[0], event.job[1], event.percent)
            else:
                self._link.stats.progress_refused += 1
                log.warning("worker=%s progress job=%d generation=%d percent=%d refused: %s (%s)",
                            self._s.worker_id, event.job[0], event.job[1], event.percent,
                            event.reason, event.detail)
        elif isinstance(event, ParkAnswer):
            a = self._active.get(event.job)
            if a is None:
                return
            if event.accepted:
                a.parked = True
                self._link.stats.parked += 1
                log.info("worker=%s park job=%d generation=%d parked until %d", self._s.worker_id,
                         event.job[0], event.job[1], event.deadline_us)
            else:
                log.warning("worker=%s park job=%d generation=%d refused: %s (%s)",
                            self._s.worker_id, event.job[0], event.job[1], event.reason,
                            event.detail)
            if a.park_answer is not None:
                a.park_answer.put(event)
        elif isinstance(event, SessionReady):
            self._on_ready()

    def _on_assigned(self, fields: Dict[str, Any]) -> None:
        link = self._link
        saved = fields.get("resume")
        job_id, generation = fields["job_id"], fields["generation"]

        def report(percent: int, note: str, checkpoint: str) -> None:
            self.post(job_id, generation, Outcome(PROGRESS, progress=(percent, note, checkpoint)))

        answers: "queue.Queue[ParkAnswer]" = queue.Queue()

        def park(timeout_ms: int, note: str) -> ParkTicket:
            self.post(job_id, generation, Outcome(PARK, park=(timeout_ms, note, answers)))
            try:
                answer = answers.get(timeout=max(30.0, self._s.reply_timeout * 6))
            except queue.Empty:
                raise ParkRefused("no_answer", "the coordinator did not answer the PARK") from None
            if not answer.accepted:
                raise ParkRefused(answer.reason, answer.detail)
            return ParkTicket(job_id, generation, answer.token, answer.deadline_us)

        job = Job(job_id=job_id, generation=generation,
                  attempts=fields["attempts"], priority=fields["priority"],
                  payload=fields["payload"], lease_ms=fields["lease_ms"],
                  resume=Resume(saved["generation"], saved["percent"], saved["note"],
                                saved["checkpoint"]) if saved else None,
                  _report=report, _park=park)
        self._link.stats.claimed += 1
        active = _Active(job)
        self._active[(job.job_id, job.generation)] = active
        if self._stop_state()[0]:
            log.info("worker=%s release job=%d generation=%d: assigned while stopping",
                     self._s.worker_id, job.job_id, job.generation)
            active.finished = True
            link.release((job.job_id, job.generation))
            return
        log.info("worker=%s assigned job=%d generation=%d attempts=%d", self._s.worker_id,
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
        log.warning("worker=%s job=%d generation=%d lost: %s (%s)", self._s.worker_id, job_id,
                    generation, lost.reason, lost.detail)
        if a.finished and not self._link_holds(a):
            del self._active[lost.job]  # its outcome is not in flight: nothing more will come

    def _link_holds(self, a: _Active) -> bool:
        return self._link.held.holds((a.job.job_id, a.job.generation))

    def _on_verdict_event(self, v: Verdict) -> None:
        s = self._link.stats
        if v.accepted:
            if v.op == "complete":
                s.completed += 1
            elif v.op == "fail":
                s.failed += 1
            else:
                s.released += 1
            log.info("worker=%s %s job=%d generation=%d accepted state=%s%s", self._s.worker_id,
                     v.op, v.job_id, v.generation, v.state, " (replayed)" if v.replayed else "")
        else:
            s.rejected[v.reason] += 1
            log.warning("worker=%s %s job=%d generation=%d rejected: %s (%s)", self._s.worker_id,
                        v.op, v.job_id, v.generation, v.reason, v.detail)
        self._active.pop((v.job_id, v.generation), None)
        if self._on_verdict is not None:
            try:
                self._on_verdict(v)
            except Exception:
                log.exception("worker=%s on_verdict raised", self._s.worker_id)

    # ---- outcomes from the handler threads ----

    def post(self, job_id: int, generation: int, outcome: Outcome) -> None:
        """Hands an outcome (or STOP_RENEWING) to the I/O thread. Any thread."""
        self._outcomes.put((job_id, generation, outcome))
        self._wake()

    def _run_handler(self, job: Job) -> None:
        self.post(job.job_id, job.generation, run_handler(self._handler, job, self._s.worker_id))

    def _take_outcomes(self) -> None:
        link = self._link
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
            if kind == STOP_RENEWING:
                link.stop_renewing(job_id)
                continue
            if kind == PROGRESS:
                if not a.finished and outcome.progress is not None:
                    link.progress(ref, *outcome.progress)
                continue
            if kind == PARK:
                if outcome.park is not None:
                    timeout_ms, note, answers = outcome.park
                    a.park_answer = answers
                    link.park(ref, timeout_ms, note)
                continue
            a.finished = True
            if a.parked:
                del self._active[ref]  # the outside system finishes it: nothing to send
                continue
            if outcome.handler_error:
                self._link.stats.handler_errors += 1
            if kind == "complete":
                # The next claim rides on the completion (one message, one transaction where
                # the coordinator grants it), counting this job as done already.
                now = time.monotonic()
                slots = self._claim_slots(now, counted_twice=1)
                if slots > 0:
                    link.complete_then_claim(ref, outcome.text, slots, self._s.claim_wait_ms)
                    self._claim_sent_at = now
                else:
                    link.complete(ref, outcome.text)
            elif kind == "fail":
                link.fail(ref, outcome.text, outcome.retryable)
            elif kind == "release" or (kind == "cancelled" and not a.revoked):
                # Cancelled without a revocation (our clock, a stop, or the handler's own
                # decision): the coordinator may still think the job is held; give it back.
                link.release(ref)
            else:
                del self._active[ref]  # revoked and given up: nothing to send

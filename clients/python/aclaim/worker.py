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
import signal
import threading
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import zmq

from . import _wire
from ._events import LinkOptions
from ._link import Link
from ._loop import STOP_RENEWING, Loop, LoopSettings
from ._outcome import Outcome
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


class Worker:
    """A reviewer serving some queues of one organization.

    ``endpoints`` are coordinator endpoints (``tcp://host:port``), tried in turn: a session that
    is lost, or cannot be opened, moves on to the next. ``worker_id`` is the reviewer's stable
    identity (under CURVE the name its key was registered with). ``org_id`` is sent in plaintext
    development mode only; under CURVE the key decides. ``queues`` are the skills served
    (empty: ``default``). Timeouts are in seconds. ``complete_claim`` (protocol 1.2): when a
    handler finishes and a slot is free, the completion carries the next claim, one message and
    one transaction at a coordinator that grants it (two requests otherwise); False asks for
    nothing and sends every request alone, as a 1.1 worker does. ``renew_held`` (protocol 1.3):
    one RENEW per heartbeat renews every held job at a coordinator that grants it (one RENEW
    per job otherwise); False renews each job alone. ``reconnect_hints`` (protocol 1.4): after
    losing its coordinator the worker spreads its first reconnection over a window sized by the
    coordinator's sessions, and waits out a refusal's retry_after_ms. ``progress`` (protocol
    1.5): ``job.progress()`` reports how far a job is and leaves a checkpoint, and ``job.resume``
    holds the checkpoint an earlier holder of the job saved; False asks for neither. ``park``
    (protocol 1.6, off by default): ``job.park()`` hands a job to an outside system and returns
    the callback token it finishes the job with."""

    def __init__(self, endpoints: Union[str, Sequence[str]], worker_id: str, *,
                 org_id: int = 0, queues: Sequence[str] = (),
                 curve: Optional[CurveKeys] = None, concurrency: int = 1,
                 claim_wait: float = 1.0, reply_timeout: float = 5.0,
                 backoff_first: float = 0.1, backoff_cap: float = 5.0,
                 retry_delay: float = 0.2, stop_timeout: float = 10.0,
                 complete_claim: bool = True, renew_held: bool = True,
                 reconnect_hints: bool = True, progress: bool = True, park: bool = False,
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
            max_in_flight=32, complete_claim=bool(complete_claim),
            renew_held=bool(renew_held), reconnect_hints=bool(reconnect_hints),
            progress=bool(progress), park=bool(park))
        self._context = context
        # Handler threads, stop() and signal handlers wake the I/O thread through a pipe; this
        # is its writing end while run() runs.
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
        self._loop: Optional[Loop] = None

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
            if not self.join(timeout):
                raise TimeoutError(f"worker {self.worker_id} did not stop within {timeout} s")

    def join(self, timeout: Optional[float] = None) -> bool:
        """Waits up to `timeout` seconds for a worker started by start() to end; False if it is
        still running. Re-raises what ended it (a WorkerError when the coordinator refused it)."""
        if self._thread is None:
            raise RuntimeError("join() is for a worker started with start()")
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        if self._error is not None:
            raise self._error
        return True

    def stop_renewing(self, job: Job) -> None:
        """Sends no more heartbeats for this job while its handler runs on: for rehearsing a
        stalled reviewer, whose lease the coordinator then reclaims (REVOKED ``reclaimed``).
        Safe from any thread."""
        loop = self._loop
        if loop is not None:
            loop.post(job.job_id, job.generation, Outcome(STOP_RENEWING))

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
            self._wake_w = wake_w
        self._link = Link(context, self._options, wake_fd=wake_r)
        self._link.stats = self._stats
        settings = LoopSettings(worker_id=self.worker_id, concurrency=self.concurrency,
                                claim_wait_ms=self._claim_wait_ms, stop_timeout=self.stop_timeout,
                                reply_timeout=self._options.reply_timeout)
        loop = Loop(self._link, handler, settings, self._stop_state, self._wake, wake_r,
                    self._on_verdict, self._ready.set)
        self._loop = loop
        previous = self._install_signals() if handle_signals else {}
        try:
            loop.run()
        except BaseException:
            loop.cancel_all("stopping", "the worker ended with an error")
            raise
        finally:
            self._link.close()
            for sig, old in previous.items():
                signal.signal(sig, old)
            with self._lock:
                self._wake_w = None
            os.close(wake_r)
            os.close(wake_w)

    def _stop_state(self) -> Tuple[bool, bool]:
        with self._lock:
            return self._stop_requested, self._cancel_requested

    def _install_signals(self) -> Dict[int, object]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}

        def on_signal(signum: int, frame: object) -> None:
            self.stop(cancel=self._stop_requested, wait=False)

        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
        return previous

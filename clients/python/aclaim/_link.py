"""A worker's connection to its coordinators: one DEALER socket at a time, the session
(HELLO/WELCOME), pipelined requests matched by id, lease renewals at the coordinator's heartbeat,
and reconnection with backoff (jitter, cap) that moves to the next endpoint and re-sends only
what is safe to re-send. The same behaviour as the C++ client (worker/client.cpp).

Single-threaded: only the worker's I/O thread touches a Link. Its owner calls poll() in a loop
and reacts to the events it returns.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Tuple

import zmq

from . import _wire
from ._events import LEASE_LOST, TERMINAL_OPS, ClaimEnded, Event, JobLost, LinkOptions, Pending
from ._held import HeldJobs, JobRef
from ._replies import Replies
from .model import Welcome, WorkerStats

log = logging.getLogger("aclaim.worker")

# The first reconnection after a lost session waits a uniformly random share of a window of
# SPREAD_PER_SESSION seconds per session the coordinator last reported (WELCOME's ``sessions``),
# kept within [backoff_first (SPREAD_MIN by default), SPREAD_MAX]; a coordinator's retry_after_ms
# is honoured up to MAX_RETRY_AFTER, plus up to RETRY_JITTER. The same constants as
# common/base/reconnect_spread.hpp (docs/protocol.md, "Reconnecting a fleet").
SPREAD_PER_SESSION = 0.002
SPREAD_MIN = 0.1
SPREAD_MAX = 60.0
MAX_RETRY_AFTER = 60.0
RETRY_JITTER = 0.1


def spread_window(sessions: Optional[int], least: float = SPREAD_MIN) -> float:
    """The window for a coordinator that reported `sessions` (None: not known), at least
    `least` (the worker's first back-off)."""
    least = min(max(least, 0.0), SPREAD_MAX)
    if not sessions or sessions <= 0:
        return least
    return min(SPREAD_MAX, max(least, SPREAD_PER_SESSION * sessions))


class Link(Replies):
    """The session with one coordinator out of several endpoints, and everything in flight."""

    def __init__(self, context: zmq.Context, options: LinkOptions,
                 wake_fd: Optional[int] = None) -> None:
        if not options.endpoints:
            raise ValueError("at least one coordinator endpoint is needed")
        self._ctx = context
        self._o = options
        self._clock = options.clock
        self._wake_fd = wake_fd
        self._socket: Optional[zmq.Socket] = None
        self._state = "closed"  # closed, backing_off, greeting, ready
        self._endpoint_index = 0
        self._round_start = 0
        self._backoff_next = options.backoff_first
        self._reconnect_at = 0.0
        # Attempts since the last WELCOME; the coordinator's sessions (reconnect hints) and when
        # a job was last assigned (a worker busy within a lease has work at stake).
        self._attempts = 0
        self._fleet: Optional[int] = None
        self._last_assigned: Optional[float] = None
        self._hello_req = 0
        self._hello_deadline = 0.0
        self._had_session = False
        # A coordinator older than protocol 1.2 refused HELLO's features: greet it without them.
        self._features_refused = False
        # The coordinator refused a RENEW that named several jobs although WELCOME granted it:
        # renew each job alone until the next WELCOME.
        self._renew_held_refused = False
        self._next_req = 1
        self._pending: Dict[int, Pending] = {}
        self.held = HeldJobs()
        self.welcome: Optional[Welcome] = None
        self.stats = WorkerStats()

    # ---- state ----

    @property
    def ready(self) -> bool:
        return self._state == "ready"

    @property
    def endpoint(self) -> str:
        """The endpoint of the current (or next) session."""
        return self._o.endpoints[self._endpoint_index]

    def granted(self, feature: str) -> bool:
        """Whether the open session granted a feature of protocol 1.2 or later (WELCOME's
        features)."""
        return self.ready and self.welcome is not None and feature in self.welcome.features

    def claim_pending(self) -> bool:
        return any(p.kind == "CLAIM" for p in self._pending.values())

    def pending(self) -> int:
        """Requests sent or waiting to be sent that have not been answered."""
        return len(self._pending)

    def awaiting(self) -> int:
        """Claims and outcomes not answered yet: what a stopping worker waits for (a renewal's
        answer no longer matters once the job's outcome is in)."""
        return sum(1 for p in self._pending.values() if p.kind == "CLAIM" or
                   p.kind in TERMINAL_OPS)

    # ---- requests ----

    def start(self) -> None:
        """Opens the socket and sends HELLO; poll() reports SessionReady once it is answered."""
        self._open_socket()
        self._send_hello(self._clock())

    def claim(self, max_jobs: int, wait_ms: int) -> int:
        _wire.check_claim(max_jobs, wait_ms)
        return self._submit("CLAIM", {"max_jobs": max_jobs, "wait_ms": wait_ms})

    def complete(self, job: JobRef, result_ref: str) -> int:
        _wire.check_result_ref(result_ref)
        self.held.stop_renewing(job[0])
        return self._submit("COMPLETE", {"job_id": job[0], "generation": job[1],
                                         "result_ref": result_ref})

    def complete_then_claim(self, job: JobRef, result_ref: str, max_jobs: int,
                            wait_ms: int) -> Tuple[int, int]:
        """COMPLETE and the next CLAIM: one message (answered ACCEPTED or REJECTED, then
        ASSIGNED or NO_WORK; one transaction at the coordinator) where the session grants
        ``complete_claim``, otherwise the two requests one after the other. Returns the ids of
        the completion and of the claim."""
        _wire.check_result_ref(result_ref)
        _wire.check_claim(max_jobs, wait_ms)
        if not self.granted(_wire.FEATURE_COMPLETE_CLAIM):
            return self.complete(job, result_ref), self.claim(max_jobs, wait_ms)
        self.held.stop_renewing(job[0])
        done, claim = self._next_req, self._next_req + 1
        self._next_req += 2
        now = self._clock()
        claim_fields = {"req": claim, "max_jobs": max_jobs, "wait_ms": wait_ms}
        complete = Pending("COMPLETE", {"req": done, "job_id": job[0], "generation": job[1],
                                        "result_ref": result_ref,
                                        "next": [dict(claim_fields)]}, due=now)
        # Both entries first, in id order; the completion's _send_pending sends the two.
        self._pending[done] = complete
        self._pending[claim] = Pending("CLAIM", claim_fields, due=now, carried=True)
        self._send_pending(complete, now)
        return done, claim

    def fail(self, job: JobRef, reason: str, retryable: bool) -> int:
        self.held.stop_renewing(job[0])
        return self._submit("FAIL", {"job_id": job[0], "generation": job[1],
                                     "reason": _wire.clip_text(reason),
                                     "retryable": bool(retryable)})

    def release(self, job: JobRef) -> int:
        self.held.stop_renewing(job[0])
        return self._submit("RELEASE", {"job_id": job[0], "generation": job[1]})

    def progress(self, job: JobRef, percent: int, note: str, checkpoint: str) -> int:
        """PROGRESS (protocol 1.5): how far the job is, and what its next holder resumes from;
        answered by a ProgressSaved event. It does not renew the lease."""
        _wire.check_progress(percent, note, checkpoint)
        return self._submit("PROGRESS", {"job_id": job[0], "generation": job[1],
                                         "percent": percent, "note": note,
                                         "checkpoint": checkpoint})

    def park(self, job: JobRef, timeout_ms: int, note: str) -> int:
        """PARK (protocol 1.6): hands the job to an outside system; answered by a ParkAnswer
        event. Renewals stop now: a parked job has no lease."""
        _wire.check_park(timeout_ms, note)
        self.held.stop_renewing(job[0])
        return self._submit("PARK", {"job_id": job[0], "generation": job[1],
                                     "timeout_ms": timeout_ms, "note": note})

    def stop_renewing(self, job_id: int) -> None:
        """No more heartbeats for a job that stays held: for rehearsing a stalled reviewer."""
        self.held.stop_renewing(job_id)

    def _submit(self, kind: str, fields: Dict[str, Any]) -> int:
        req = self._next_req
        self._next_req += 1
        now = self._clock()
        p = Pending(kind, {"req": req, **fields}, due=now)
        self._pending[req] = p
        if self.ready:
            self._send_pending(p, now)
        return req

    def _in_flight(self) -> int:
        return sum(1 for p in self._pending.values() if p.sent and not p.bundled)

    def _send_pending(self, p: Pending, now: float) -> None:
        # At the cap the request keeps its turn (requests are kept in id order) until a reply
        # frees a slot. A carried CLAIM goes out with its COMPLETE, a bundled RENEW with the
        # RENEW that names it, never on their own.
        if p.carried or p.bundled or self._in_flight() >= self._o.max_in_flight:
            return
        carried: Optional[Pending] = None
        if "next" in p.fields:
            claim = self._pending.get(p.fields["next"][0]["req"])
            if claim is not None and self.granted(_wire.FEATURE_COMPLETE_CLAIM):
                carried = claim
            else:
                # This session does not take a CLAIM inside a COMPLETE: the claim goes alone.
                if claim is not None:
                    claim.carried = False
                del p.fields["next"]
        if not self._send(p.kind, p.fields):
            p.due = now + self._o.retry_delay
            return
        p.sends += 1
        if p.sends > 1 and p.kind in TERMINAL_OPS:
            self.stats.resent += 1
        p.sent = True
        p.due = now + self._o.reply_timeout + p.fields.get("wait_ms", 0) / 1000.0
        if carried is not None:
            # The claim is answered on its own from now on; a re-sent COMPLETE goes without it.
            carried.sent = True
            carried.due = p.due + carried.fields["wait_ms"] / 1000.0
            del p.fields["next"]
        # Each job of a RENEW that names several is answered on its own, under its own req.
        for entry in p.fields.get("held", ()):
            bundled = self._pending.get(entry["req"])
            if bundled is not None:
                bundled.sent = True
                bundled.due = p.due

    def _send_renewals(self, now: float) -> None:
        """The renewals due now: one RENEW for them all where the session grants
        ``renew_held`` (several when they do not fit one body), else one each."""
        together = self.granted(_wire.FEATURE_RENEW_HELD) and not self._renew_held_refused
        # Bundled, a job due within half a heartbeat goes with the ones due now, so that the
        # held jobs soon share one heartbeat (HeldJobs.take_due).
        due = self.held.take_due(now, self.held.heartbeat_s / 2 if together else 0.0)
        if not together or len(due) < 2:
            for job_id, generation in due:
                self._submit("RENEW", {"job_id": job_id, "generation": generation})
            return
        # As many jobs as fit the coordinator's body limit: a JSON entry is at most 100 bytes.
        limit = self.welcome.max_body_bytes if self.welcome is not None else 0
        per_message = max(1, min(_wire.MAX_HELD_RENEWALS, (limit - 256) // 100))
        for first in range(0, len(due), per_message):
            chunk = due[first:first + per_message]
            held = []
            # The entries first, so that sending the RENEW finds them; they are sent with it.
            for job_id, generation in chunk[1:]:
                req = self._next_req
                self._next_req += 1
                entry = {"req": req, "job_id": job_id, "generation": generation}
                held.append(entry)
                self._pending[req] = Pending("RENEW", dict(entry), due=now, bundled=True)
            self._submit("RENEW", {"job_id": chunk[0][0], "generation": chunk[0][1],
                                   "held": held})

    def _send(self, kind: str, fields: Dict[str, Any]) -> bool:
        if self._socket is None:
            return False
        frames = _wire.encode(kind, fields)
        try:
            # NOBLOCK: a full queue means the coordinator is not reading; the reply deadline
            # and the retry schedule deal with that instead of blocking the worker.
            self._socket.send_multipart(frames, flags=zmq.NOBLOCK)
            return True
        except zmq.Again:
            return False
        except zmq.ZMQError as e:
            log.warning("worker=%s send %s failed: %s", self._o.worker_id, kind, e)
            return False

    # ---- the socket ----

    def _open_socket(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        # Unsent requests die with the socket: what is safe to re-send is re-sent on the next.
        sock.setsockopt(zmq.LINGER, 0)
        curve = self._o.curve
        sock.setsockopt(zmq.MAXMSGSIZE, _wire.MAX_TRANSPORT_BYTES +
                        (_wire.CURVE_FRAME_OVERHEAD if curve else 0))
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, int(self._o.backoff_cap * 1000))
        if curve is not None:
            sock.curve_serverkey = curve.server_public.encode("ascii")
            sock.curve_publickey = curve.client_public.encode("ascii")
            sock.curve_secretkey = curve.client_secret.encode("ascii")
        sock.connect(self.endpoint)
        self._socket = sock

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def _send_hello(self, now: float) -> None:
        self._hello_req = self._next_req
        self._next_req += 1
        self._state = "greeting"
        self._hello_deadline = now + self._o.reply_timeout
        fields: Dict[str, Any] = {"req": self._hello_req, "worker_id": self._o.worker_id,
                                  "org_id": self._o.org_id}
        # An optional member (protocol 1.1) is left out when empty, so that a worker serving
        # only "default" speaks 1.0 exactly.
        if self._o.queues:
            fields["queues"] = list(self._o.queues)
        # Protocol 1.2: ask for what this worker would use; WELCOME says what is granted.
        if self._asks_features():
            fields["features"] = ([_wire.FEATURE_COMPLETE_CLAIM] if self._o.complete_claim
                                  else []) + ([_wire.FEATURE_RENEW_HELD] if self._o.renew_held
                                              else []) + ([_wire.FEATURE_RECONNECT_HINTS]
                                                          if self._o.reconnect_hints else []) + (
                [_wire.FEATURE_PROGRESS] if self._o.progress else []) + (
                [_wire.FEATURE_PARK] if self._o.park else [])
        self._send("HELLO", fields)

    def _asks_features(self) -> bool:
        return ((self._o.complete_claim or self._o.renew_held or self._o.reconnect_hints or
                 self._o.progress or self._o.park) and not self._features_refused)

    def _reconnect_delay(self, nominal: float, now: float,
                         retry_after: Optional[float]) -> float:
        """The wait before the next attempt: the first after a session a uniform share of the
        fleet's window (a heartbeat at most for a worker with work at stake), later ones
        `nominal` with jitter, never less than the coordinator's retry_after."""
        first = self._attempts == 0
        lease = self.welcome.lease_ms / 1000.0 if self.welcome is not None else 0.0
        busy = len(self.held) > 0 or (self._last_assigned is not None and
                                      now - self._last_assigned < lease)
        told = retry_after is not None and retry_after > 0
        delay = 0.0
        if first and not told:
            window = spread_window(self._fleet, self._o.backoff_first)
            if busy:
                window = min(window, self.held.heartbeat_s)
            delay = self._o.rng.uniform(0, window)
        elif not first:
            delay = self._o.rng.uniform(nominal / 2, nominal)
        if told:
            # The coordinator spread the figures it gave (from the fleet it has now); the worker
            # takes its draw instead of its own on a first attempt, and only blurs it.
            r = min(retry_after or 0.0, MAX_RETRY_AFTER)
            delay = max(delay, self._o.rng.uniform(r, r + RETRY_JITTER))
        self._attempts += 1
        # Whatever it was told: a longer wait would outlast its leases.
        return min(delay, self.held.heartbeat_s) if busy else delay

    def _reconnect(self, why: str, now: float, out: List[Event],
                   retry_after: Optional[float] = None) -> None:
        self.stats.reconnects += 1
        self._close_socket()
        self._state = "backing_off"
        # A lost session moves on to the next endpoint. Within a round of the endpoints the next
        # one is tried after the first delay; each round that ends without a session doubles
        # the delay, up to the cap.
        self._endpoint_index = (self._endpoint_index + 1) % len(self._o.endpoints)
        if self._endpoint_index == self._round_start:
            nominal = self._backoff_next
            self._backoff_next = min(self._o.backoff_cap, self._backoff_next * 2)
        else:
            nominal = self._o.backoff_first
        # The first attempt after a session is spread over a window the size of the fleet;
        # jitter spreads every later one over its interval.
        delay = self._reconnect_delay(nominal, now, retry_after)
        self._reconnect_at = now + delay
        log.warning("worker=%s reconnecting to %s in %d ms: %s", self._o.worker_id,
                    self.endpoint, round(delay * 1000), why)
        for req in list(self._pending):
            p = self._pending[req]
            if p.kind in TERMINAL_OPS:
                p.sent = False
                p.due = now
                # Its claim is reported lost below, as every pending claim is.
                p.fields.pop("next", None)
                continue
            # A lost CLAIM is never re-sent: whatever it was granted comes back when the lease
            # ends. A lost RENEW is superseded by renewing everything after WELCOME.
            if p.kind == "CLAIM":
                out.append(ClaimEnded("connection_lost", why))
            del self._pending[req]

    def close(self) -> None:
        """Sends BYE (when a session is open) and closes the socket."""
        if self._socket is not None and self.ready:
            self._send("BYE", {"req": self._next_req})
            self._next_req += 1
            # Give BYE a moment to leave; it needs no answer.
            self._socket.close(linger=200)
            self._socket = None
        self._close_socket()
        self._state = "closed"
        self._pending.clear()

    # ---- the loop ----

    def poll(self, max_wait: float) -> List[Event]:
        """Waits at most `max_wait` seconds for traffic (or the wake-up descriptor), sends due
        renewals and re-sends, detects a silent coordinator, and returns what happened. Raises
        WorkerError when the coordinator refuses this worker for good."""
        out: List[Event] = []
        now = self._clock()
        self._run_timers(now, out)
        wait = 0.0 if out else max_wait
        deadline = self._next_deadline()
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        poller = zmq.Poller()
        if self._socket is not None:
            poller.register(self._socket, zmq.POLLIN)
        if self._wake_fd is not None:
            poller.register(self._wake_fd, zmq.POLLIN)
        try:
            ready = dict(poller.poll(timeout=max(0, round(wait * 1000))))
        except zmq.ZMQError as e:
            if e.errno != zmq.EINTR:
                raise
            ready = {}
        if self._socket is not None and self._socket in ready:
            self._receive_all(out)
        self._run_timers(self._clock(), out)
        return out

    def _receive_all(self, out: List[Event]) -> None:
        while self._socket is not None:
            sock = self._socket
            try:
                frames = sock.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                kind, body = _wire.decode(frames)
            except _wire.WireError as e:
                log.warning("worker=%s ignored a message from the coordinator: %s",
                            self._o.worker_id, e)
                continue
            self._handle(kind, body, self._clock(), out)
            # A reconnect replaced the socket: what is queued on the old one is gone with it.
            if self._socket is not sock:
                return

    def _run_timers(self, now: float, out: List[Event]) -> None:
        for job in self.held.take_expired(now):
            self.stats.lost_leases += 1
            out.append(JobLost(job, LEASE_LOST, "no renewal was answered before the lease ran "
                               "out (by this worker's clock); the coordinator takes it back"))
        if self._state == "closed":
            return
        if self._state == "backing_off":
            if now >= self._reconnect_at:
                # A HELLO turned away for now keeps its connection: only HELLO is said again.
                if self._socket is None:
                    self._open_socket()
                self._send_hello(now)
            return
        if self._state == "greeting":
            if now >= self._hello_deadline:
                self._reconnect(f"no WELCOME within {round(self._o.reply_timeout * 1000)} ms "
                                f"from {self.endpoint}", now, out)
            return
        for req, p in self._pending.items():
            if p.sent and p.due <= now:
                self._reconnect(f"no reply to {p.kind} (req {req}) in time", now, out)
                return
        for p in list(self._pending.values()):
            if not p.sent and p.due <= now:
                self._send_pending(p, now)
        self._send_renewals(now)

    def _next_deadline(self) -> Optional[float]:
        times = []
        if self._state == "backing_off":
            times.append(self._reconnect_at)
        elif self._state == "greeting":
            times.append(self._hello_deadline)
        elif self._state == "ready":
            at_cap = self._in_flight() >= self._o.max_in_flight
            for p in self._pending.values():
                # Requests waiting for a free slot are woken by the reply that frees it; a
                # carried CLAIM goes when its COMPLETE does, a bundled RENEW with its RENEW.
                if p.carried or (p.bundled and not p.sent):
                    continue
                if p.sent or not at_cap:
                    times.append(p.due)
        held = self.held.next_due()
        if held is not None:
            times.append(held)
        return min(times) if times else None

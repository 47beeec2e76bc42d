"""What each reply from the coordinator means to a Link: the other half of _link.py (as
client_replies.cpp is of the C++ client). Single-threaded, like the Link."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from . import _wire
from ._events import (TERMINAL_OPS, ClaimEnded, Event, JobAssigned, JobLost, ParkAnswer,
                      Pending, ProgressSaved, SessionReady)
from ._held import HeldJobs
from .errors import WorkerError
from .model import Verdict, Welcome, WorkerStats

log = logging.getLogger("aclaim.worker")


class Replies:
    """Reply handling, mixed into Link; the attributes below are the Link's."""

    _o: Any
    _state: str
    _hello_req: int
    _had_session: bool
    _features_refused: bool
    _renew_held_refused: bool
    _pending: Dict[int, Pending]
    _endpoint_index: int
    _round_start: int
    _backoff_next: float
    _attempts: int
    _fleet: Optional[int]
    _last_assigned: Optional[float]
    _reconnect_at: float
    held: HeldJobs
    welcome: Optional[Welcome]
    stats: WorkerStats
    endpoint: str

    def _reconnect(self, why: str, now: float, out: List[Event],
                   retry_after: Optional[float] = None) -> None:
        raise NotImplementedError

    def _reconnect_delay(self, nominal: float, now: float,
                         retry_after: Optional[float]) -> float:
        raise NotImplementedError

    def _send_pending(self, p: Pending, now: float) -> None:
        raise NotImplementedError

    def _send_hello(self, now: float) -> None:
        raise NotImplementedError

    def _asks_features(self) -> bool:
        raise NotImplementedError

    def _take(self, req: int) -> Optional[Pending]:
        return self._pending.pop(req, None)

    def _handle(self, kind: str, body: Dict[str, Any], now: float, out: List[Event]) -> None:
        req = body["req"]
        if kind == "WELCOME":
            if self._state == "greeting" and req == self._hello_req:
                self._on_welcome(body, now, out)
        elif kind == "ASSIGNED":
            self._take(req)
            self._last_assigned = now
            # Jobs are taken even for a claim given up on: the coordinator granted them.
            # Protocol 1.5: the progress an earlier holder saved, by job.
            resume = {r["job_id"]: r for r in body.get("resume", ())}
            for job in body["jobs"]:
                self.held.add((job["job_id"], job["generation"]), job["lease_ms"] / 1000.0, now)
                if job["job_id"] in resume:
                    job = dict(job, resume=resume[job["job_id"]])
                out.append(JobAssigned(job))
        elif kind == "NO_WORK":
            self._take(req)
            out.append(ClaimEnded("no_work", body["reason"]))
            if body["reason"] == "draining":
                # The coordinator is going away: take the session (and any outcome still to
                # deliver) to the next one now rather than claim from it until it is gone.
                self._reconnect("the coordinator is draining", now, out)
        elif kind == "LEASE":
            self._take(req)
            self.stats.renewals += 1
            self.held.renewed((body["job_id"], body["generation"]), body["lease_ms"] / 1000.0)
        elif kind == "REVOKED":
            if req != 0:
                self._take(req)
            self.stats.revoked += 1
            job = (body["job_id"], body["generation"])
            if self.held.remove(job):
                out.append(JobLost(job, body["reason"], body["detail"]))
        elif kind == "PARKED":
            p = self._take(req)
            if p is not None and p.kind == "PARK":
                self.held.remove(p.job())
                out.append(ParkAnswer(p.job(), True, body["token"], body["deadline_us"]))
        elif kind in ("ACCEPTED", "REJECTED"):
            p = self._take(req)
            if p is not None and p.kind == "PARK":
                # REJECTED says the job is no longer this worker's (its completion would be
                # refused).
                self.held.remove(p.job())
                out.append(ParkAnswer(p.job(), False, reason=body.get("reason", kind),
                                      detail=body.get("detail", "")))
                return
            if p is not None and p.kind == "PROGRESS":
                accepted = kind == "ACCEPTED"
                out.append(ProgressSaved(p.job(), p.fields["percent"], accepted,
                                         "" if accepted else body["reason"],
                                         "" if accepted else body["detail"]))
                return
            if p is None or p.kind not in TERMINAL_OPS:
                return  # a late duplicate answer: already reported
            self.held.remove(p.job())
            accepted = kind == "ACCEPTED"
            out.append(Verdict(op=TERMINAL_OPS[p.kind], job_id=p.job()[0],
                               generation=p.job()[1], accepted=accepted,
                               replayed=bool(body["replayed"]) if accepted else False,
                               state=body["state"] if accepted else "",
                               reason="" if accepted else body["reason"],
                               detail="" if accepted else body["detail"]))
        elif kind == "ERROR":
            self._handle_error(body, now, out)

    def _handle_error(self, e: Dict[str, Any], now: float, out: List[Event]) -> None:
        self.stats.errors += 1
        code, text, req = e["code"], e["text"], e["req"]
        # Protocol 1.4: how long the coordinator asks this worker to stay away.
        after = e["retry_after_ms"] / 1000.0 if "retry_after_ms" in e else None
        if self._state == "greeting" and req == self._hello_req:
            # A coordinator older than protocol 1.2 cannot read HELLO's features (an unknown
            # member): greet it again without them, and send every request alone.
            if code == "undecodable" and self._asks_features():
                log.info("worker=%s %s does not read HELLO's features (%s); greeting it as 1.1",
                         self._o.worker_id, self.endpoint, text)
                self._features_refused = True
                self._send_hello(now)
                return
            if code not in _wire.RETRYABLE_ERRORS and code != "draining":
                raise WorkerError(f"{self.endpoint} refused HELLO: {code}: {text}", code)
            if after is not None and code in ("overloaded", "too_many_requests"):
                # Turned away for now by a coordinator that said when to come back: the
                # connection is kept, and HELLO said again on it then.
                self._state = "backing_off"
                self._reconnect_at = now + self._reconnect_delay(self._o.backoff_first, now,
                                                                 after)
                log.info("worker=%s HELLO answered %s; saying it again in %d ms",
                         self._o.worker_id, code, round((self._reconnect_at - now) * 1000))
                return
            self._reconnect(f"HELLO answered {code}", now, out, after)
            return
        # The key was revoked: nothing this worker sends will be served again, and reconnecting
        # would only fail the handshake. The jobs it holds expire and are reclaimed.
        if code == "key_revoked":
            raise WorkerError(f"the coordinator cut this worker off: key_revoked: {text}", code)
        # no_session: the coordinator restarted and ZeroMQ reconnected underneath; draining: it
        # is going away. Either way a fresh session, perhaps with another coordinator, is needed.
        if code in ("no_session", "draining"):
            self._reconnect(f"ERROR {code}: {text}", now, out, after)
            return
        p = self._pending.get(req)
        if p is None:
            log.warning("worker=%s ERROR %s for no pending request (req %d): %s",
                        self._o.worker_id, code, req, text)
            return
        terminal = p.kind in TERMINAL_OPS
        if terminal and code in _wire.RETRYABLE_ERRORS:
            p.retry_delay = (self._o.retry_delay if p.retry_delay == 0
                             else min(p.retry_delay * 2, self._o.backoff_cap))
            if after is not None:
                p.retry_delay = max(p.retry_delay, after)
            p.sent = False
            p.due = now + p.retry_delay
            log.info("worker=%s %s job=%d generation=%d answered ERROR %s; re-sending in %d ms",
                     self._o.worker_id, p.kind, p.job()[0], p.job()[1], code,
                     round(p.retry_delay * 1000))
            return
        del self._pending[req]
        if terminal:
            self.held.remove(p.job())
            out.append(Verdict(op=TERMINAL_OPS[p.kind], job_id=p.job()[0],
                               generation=p.job()[1], accepted=False,
                               reason="error:" + code, detail=text))
        elif p.kind == "CLAIM":
            out.append(ClaimEnded("error", f"{code}: {text}"))
        elif p.kind == "PROGRESS":
            out.append(ProgressSaved(p.job(), p.fields["percent"], False, "error:" + code, text))
        elif p.kind == "PARK":
            # Not parked (or not known to be): the worker still holds the job, whose lease runs
            # on. Renewing it tells which: a job parked after all answers the RENEW with REVOKED.
            self.held.resume_renewing(p.job()[0], now)
            out.append(ParkAnswer(p.job(), False, reason="error:" + code, detail=text))
        elif p.kind == "RENEW":
            # Soon when the coordinator was only busy, else at the next heartbeat; a lease that
            # is really gone shows up as REVOKED.
            if code in _wire.RETRYABLE_ERRORS:
                self.held.retry_renewal(p.fields["job_id"], now + self._o.retry_delay)
            else:
                self.held.renewal_abandoned(p.fields["job_id"])
            # A RENEW refused as a message (not decodable, out of range) has this one ERROR for
            # all the jobs it named; a refusal of the session or the database answers each job.
            held = p.fields.get("held")
            if held and code in _wire.CODEC_ERRORS:
                log.warning("worker=%s RENEW of %d jobs refused (%s: %s); renewing each alone",
                            self._o.worker_id, len(held) + 1, code, text)
                self._renew_held_refused = True
                for entry in held:
                    if self._pending.pop(entry["req"], None) is not None:
                        self.held.renewal_abandoned(entry["job_id"])

    def _on_welcome(self, w: Dict[str, Any], now: float, out: List[Event]) -> None:
        self._state = "ready"
        self._renew_held_refused = False
        self.welcome = Welcome(org_id=w["org_id"], lease_ms=w["lease_ms"],
                               heartbeat_ms=w["heartbeat_ms"],
                               max_body_bytes=w["max_body_bytes"], endpoint=self.endpoint,
                               features=tuple(w.get("features", ())))
        self._backoff_next = self._o.backoff_first
        self._attempts = 0
        # An older coordinator does not say: the last figure heard is kept.
        if "sessions" in w:
            self._fleet = w["sessions"]
        self._round_start = self._endpoint_index
        self.held.heartbeat_s = max(1, w["heartbeat_ms"]) / 1000.0
        # Leases kept running while the worker was away: renew everything still held at once.
        if self._had_session:
            self.held.renew_all_now(now)
        out.append(SessionReady(self.welcome, self._had_session))
        log.info("worker=%s session with %s org=%d lease_ms=%d heartbeat_ms=%d%s",
                 self._o.worker_id, self.endpoint, w["org_id"], w["lease_ms"], w["heartbeat_ms"],
                 " (reconnected)" if self._had_session else "")
        self._had_session = True
        for p in list(self._pending.values()):
            if not p.sent and p.due <= now:
                self._send_pending(p, now)

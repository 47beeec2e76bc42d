"""A scripted ROUTER standing in for the coordinator in the unit tests: real sockets on an
ephemeral port of 127.0.0.1, every wait bounded by a deadline. The test decides each answer,
which is how situations a real coordinator seldom produces (a silent coordinator, ERROR
outcome_unknown, a refused HELLO) are reached."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import zmq

TAG = b"ACLAIM/1+json"


@dataclass
class Request:
    identity: bytes
    kind: str
    body: Dict[str, Any]

    @property
    def req(self) -> int:
        return self.body["req"]


class FakeCoordinator:
    def __init__(self, context: zmq.Context) -> None:
        self.router = context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind("tcp://127.0.0.1:*")
        self.endpoint = self.router.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.kept: List[Request] = []
        # Request types answered on receipt, for the tests that are about something else:
        # serve_in_background() answers RENEW with LEASE and CLAIM with NO_WORK.
        self.auto: Dict[str, Callable[[Request], None]] = {}

    def serve_in_background(self) -> None:
        self.auto["RENEW"] = lambda r: self.reply(
            r, "LEASE", job_id=r.body["job_id"], generation=r.body["generation"],
            lease_expires_at_us=0, lease_ms=1000)
        self.auto["CLAIM"] = lambda r: self.reply(r, "NO_WORK", reason="no pending jobs")

    def close(self) -> None:
        self.router.close(linger=0)

    def receive(self, timeout: float, pump: Optional[Callable[[], None]] = None) -> Optional[Request]:
        """The next request within `timeout` seconds, or None. `pump` runs between polls (a Link
        driven from the same thread)."""
        deadline = time.monotonic() + timeout
        while True:
            wait = 10 if pump else max(1, round((deadline - time.monotonic()) * 1000))
            if self.router.poll(wait):
                identity, tag, kind, body = self.router.recv_multipart()
                assert tag == TAG, tag
                r = Request(identity, kind.decode(), json.loads(body))
                if r.kind not in self.auto:
                    return r
                self.auto[r.kind](r)
            if pump:
                pump()
            if time.monotonic() >= deadline:
                return None

    def expect(self, kind: str, timeout: float = 5.0,
               pump: Optional[Callable[[], None]] = None) -> Request:
        """The next request of this type; others are kept in `kept` for later."""
        for i, r in enumerate(self.kept):
            if r.kind == kind:
                return self.kept.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            r = self.receive(max(0.0, left), pump) if left > 0 else None
            if r is None:
                raise AssertionError(f"no {kind} within {timeout} s (kept: "
                                     f"{[k.kind for k in self.kept]})")
            if r.kind == kind:
                return r
            self.kept.append(r)

    def send(self, identity: bytes, kind: str, **fields: Any) -> None:
        self.router.send_multipart([identity, TAG, kind.encode(), json.dumps(fields).encode()])

    def reply(self, to: Request, kind: str, **fields: Any) -> None:
        self.send(to.identity, kind, req=to.req, **fields)

    def welcome(self, hello: Request, lease_ms: int = 1000, heartbeat_ms: int = 100) -> None:
        self.reply(hello, "WELCOME", org_id=hello.body["org_id"] or 7, lease_ms=lease_ms,
                   heartbeat_ms=heartbeat_ms, max_body_bytes=65536)

    def assign(self, claim: Request, job_id: int, generation: int = 1, lease_ms: int = 1000,
               payload: str = "doc") -> None:
        self.reply(claim, "ASSIGNED", jobs=[{
            "job_id": job_id, "generation": generation, "lease_expires_at_us": 0,
            "lease_ms": lease_ms, "attempts": 1, "priority": 0, "payload": payload}])

    def accept(self, request: Request, state: str = "completed", replayed: bool = False) -> None:
        self.reply(request, "ACCEPTED", job_id=request.body["job_id"],
                   generation=request.body["generation"], state=state, replayed=replayed)

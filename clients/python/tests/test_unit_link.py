"""The worker's connection (aclaim._link) against a scripted ROUTER: sessions, renewals,
revocations, re-sends, refusals, the in-flight cap, failover between endpoints and a lease lost
by the worker's own clock. Both ends are driven from this thread; every wait has a deadline."""

from __future__ import annotations

import random
import time
import unittest
from typing import Any, List, Type

import zmq

import checkout

checkout.use()
from fake_coordinator import FakeCoordinator

from aclaim import Verdict, WorkerError
from aclaim._events import (ClaimEnded, JobAssigned, JobLost, LinkOptions, ParkAnswer,
                             SessionReady)
from aclaim._link import Link

LIMIT = 5.0


class Harness:
    """`manual_clock`: the link runs on `now`, moved `step` seconds by every pump (0 freezes it),
    so that what a test says about the link's timers is measured on the link's own clock."""

    def __init__(self, fakes: int = 1, manual_clock: bool = False, **options: Any) -> None:
        self.ctx = zmq.Context()
        self.fakes = [FakeCoordinator(self.ctx) for _ in range(fakes)]
        self.fake = self.fakes[0]
        self.manual = manual_clock
        self.now = 1000.0
        self.step = 0.005
        if manual_clock:
            options["clock"] = lambda: self.now
        options.setdefault("reply_timeout", 0.5)
        options.setdefault("backoff_first", 0.02)
        options.setdefault("backoff_cap", 0.1)
        self.link = Link(self.ctx, LinkOptions(endpoints=[f.endpoint for f in self.fakes],
                                               worker_id="rev-1", org_id=7,
                                               rng=random.Random(1), **options))
        self.events: List[Any] = []

    def close(self) -> None:
        self.link.close()
        for f in self.fakes:
            f.close()
        self.ctx.term()

    def pump(self) -> None:
        self.events.extend(self.link.poll(0.005))
        if self.manual:
            self.now += self.step

    def advance(self, seconds: float) -> None:
        """Pumps until the manual clock has moved `seconds`; requests received meanwhile are
        kept in the fake's `kept`."""
        until = self.now + seconds
        while self.now < until:
            self.pump()
            r = self.fake.receive(0)
            while r is not None:
                self.fake.kept.append(r)
                r = self.fake.receive(0)

    def sent_so_far(self) -> List[Any]:
        """Every request the fake was sent up to now and not yet taken, and forgets them: a
        RELEASE submitted now arrives after all of them, since the DEALER delivers in order."""
        self.link.release((99, 1))
        self.expect("RELEASE")
        sent, self.fake.kept = self.fake.kept, []
        return sent

    def expect(self, kind: str, fake: FakeCoordinator = None, timeout: float = LIMIT):  # type: ignore[assignment]
        return (fake or self.fake).expect(kind, timeout, self.pump)

    def next_event(self, kind: Type, timeout: float = LIMIT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if isinstance(e, kind):
                    return self.events.pop(i)
            if time.monotonic() >= deadline:
                raise AssertionError(f"no {kind.__name__} within {timeout} s: {self.events}")
            self.pump()

    def session(self, fake: FakeCoordinator = None, **welcome: Any):  # type: ignore[assignment]
        hello = self.expect("HELLO", fake)
        (fake or self.fake).welcome(hello, **welcome)
        self.next_event(SessionReady)
        return hello

    def held_job(self, job_id: int = 11, lease_ms: int = 1000):
        self.link.claim(1, 0)
        claim = self.expect("CLAIM")
        self.fake.assign(claim, job_id, lease_ms=lease_ms)
        return self.next_event(JobAssigned).job


class LinkTest(unittest.TestCase):
    def harness(self, fakes: int = 1, **options: Any) -> Harness:
        h = Harness(fakes, **options)
        self.addCleanup(h.close)
        return h

    def test_session_claim_heartbeat_and_an_accepted_completion(self) -> None:
        h = self.harness(queues=["electrical", "default"])
        h.link.start()
        hello = h.session(heartbeat_ms=50)
        self.assertEqual(hello.body, {"req": hello.req, "worker_id": "rev-1", "org_id": 7,
                                      "queues": ["electrical", "default"],
                                      "features": ["complete_claim", "renew_held",
                                                   "reconnect_hints", "progress"]})
        job = h.held_job(11)
        self.assertEqual((job["job_id"], job["payload"]), (11, "doc"))
        renew = h.expect("RENEW")
        self.assertEqual((renew.body["job_id"], renew.body["generation"]), (11, 1))
        h.fake.reply(renew, "LEASE", job_id=11, generation=1, lease_expires_at_us=0,
                     lease_ms=1000)
        h.link.complete((11, 1), "review:11")
        done = h.expect("COMPLETE")
        self.assertEqual(done.body["result_ref"], "review:11")
        h.fake.accept(done)
        v = h.next_event(Verdict)
        self.assertEqual((v.op, v.job_id, v.accepted, v.state), ("complete", 11, True,
                                                                 "completed"))
        self.assertEqual(len(h.link.held), 0)
        self.assertGreaterEqual(h.link.stats.renewals, 1)

    def test_a_refused_park_loses_the_job_and_an_errored_one_renews_it_again(self) -> None:
        h = self.harness(park=True)
        h.link.start()
        h.session(heartbeat_ms=60_000)
        # REJECTED: the job is no longer this worker's.
        lost = h.held_job(21)
        req = h.link.park((lost["job_id"], lost["generation"]), 1000, "to the lab")
        park = h.expect("PARK")
        self.assertEqual(park.req, req)
        h.fake.reply(park, "REJECTED", job_id=21, generation=1, reason="lease_expired",
                     detail="the lease ran out")
        answer = h.next_event(ParkAnswer)
        self.assertFalse(answer.accepted)
        self.assertEqual(len(h.link.held), 0)
        # ERROR: nothing was parked, the worker still holds the job, and with a heartbeat a
        # minute away its renewal goes out at once all the same.
        kept = h.held_job(22)
        h.link.park((kept["job_id"], kept["generation"]), 1000, "")
        park = h.expect("PARK")
        h.fake.reply(park, "ERROR", code="invalid", text="timeout_ms: out of range")
        answer = h.next_event(ParkAnswer)
        self.assertEqual(answer.reason, "error:invalid")
        self.assertEqual(len(h.link.held), 1)
        renew = h.expect("RENEW")
        self.assertEqual((renew.body["job_id"], renew.body["generation"]), (22, 1))

    def test_hello_leaves_out_queues_when_it_serves_only_default(self) -> None:
        h = self.harness()
        h.link.start()
        hello = h.expect("HELLO")
        self.assertNotIn("queues", hello.body)

    def test_a_pushed_revoked_stops_the_jobs_renewals(self) -> None:
        h = self.harness(manual_clock=True)
        h.link.start()
        h.session(heartbeat_ms=30)
        h.held_job(12)
        renew = h.expect("RENEW")
        h.step = 0  # no renewal falls due between here and the revocation's arrival
        h.fake.send(renew.identity, "REVOKED", req=0, job_id=12, generation=1,
                    reason="reclaimed", detail="lease expired")
        lost = h.next_event(JobLost)
        self.assertEqual((lost.job, lost.reason), ((12, 1), "reclaimed"))
        h.sent_so_far()  # what was sent before the revocation arrived
        # Three heartbeats later, by the link's clock, still no renewal of the job.
        h.step = 0.005
        h.advance(0.1)
        self.assertEqual([r.kind for r in h.sent_so_far()], [])
        self.assertEqual(len(h.link.held), 0)

    def test_a_silent_coordinator_means_reconnect_renew_and_resend_the_outcome(self) -> None:
        h = self.harness()
        h.link.start()
        first = h.session(heartbeat_ms=200)
        h.held_job(13, lease_ms=5000)
        h.held_job(15, lease_ms=5000)
        h.link.complete((13, 1), "review:13")
        h.expect("COMPLETE")  # never answered
        hello = h.expect("HELLO", timeout=LIMIT)
        self.assertNotEqual(hello.identity, first.identity)  # a new connection
        h.fake.kept.clear()  # what the old connection sent
        h.fake.welcome(hello, heartbeat_ms=3000)
        self.assertTrue(h.next_event(SessionReady).reconnected)
        # The lease kept running meanwhile: renewed at once, not a heartbeat later.
        renew = h.expect("RENEW", timeout=1.5)
        self.assertEqual((renew.body["job_id"], renew.identity), (15, hello.identity))
        again = h.expect("COMPLETE")
        self.assertEqual((again.body["job_id"], again.body["result_ref"]), (13, "review:13"))
        h.fake.accept(again, replayed=True)
        self.assertTrue(h.next_event(Verdict).replayed)
        self.assertEqual((h.link.stats.reconnects, h.link.stats.resent), (1, 1))

    def test_outcome_unknown_is_resent_and_a_rejection_is_final(self) -> None:
        h = self.harness(manual_clock=True, retry_delay=0.01)
        h.link.start()
        h.session()
        h.held_job(14)
        h.link.fail((14, 1), "x" * 2000, retryable=True)  # a reason is clipped, not refused
        first = h.expect("FAIL")
        self.assertEqual(len(first.body["reason"]), 1024)
        h.fake.reply(first, "ERROR", code="outcome_unknown", text="connection broke")
        second = h.expect("FAIL")
        self.assertEqual(second.req, first.req)
        h.fake.reply(second, "REJECTED", job_id=14, generation=1, reason="stale_generation",
                     detail="current generation is 2")
        v = h.next_event(Verdict)
        self.assertEqual((v.accepted, v.reason), (False, "stale_generation"))
        # Thirty retry delays later by the link's clock (and below its reply timeout), the
        # rejected FAIL has not been sent again.
        h.advance(0.3)
        self.assertNotIn("FAIL", [r.kind for r in h.sent_so_far()])

    def test_no_session_means_hello_again(self) -> None:
        h = self.harness()
        h.link.start()
        h.session()
        h.link.claim(1, 0)
        claim = h.expect("CLAIM")
        h.fake.reply(claim, "ERROR", code="no_session", text="send HELLO first")
        self.assertEqual(h.next_event(ClaimEnded).why, "connection_lost")
        h.session()
        self.assertTrue(h.link.ready)

    def test_a_hello_refused_for_good_is_an_error(self) -> None:
        h = self.harness()
        h.link.start()
        hello = h.expect("HELLO")
        h.fake.reply(hello, "ERROR", code="unauthenticated", text="key registered to rev-2")
        with self.assertRaises(WorkerError) as e:
            h.next_event(SessionReady)
        self.assertEqual(e.exception.code, "unauthenticated")
        self.assertIn("rev-2", str(e.exception))

    def test_key_revoked_on_any_request_ends_the_link(self) -> None:
        h = self.harness()
        h.link.start()
        h.session()
        h.link.claim(1, 0)
        h.fake.reply(h.expect("CLAIM"), "ERROR", code="key_revoked", text="revoked")
        with self.assertRaises(WorkerError) as e:
            h.next_event(ClaimEnded)
        self.assertEqual(e.exception.code, "key_revoked")

    def test_no_more_than_max_in_flight_requests_await_replies(self) -> None:
        h = self.harness(manual_clock=True, max_in_flight=2, reply_timeout=2.0)
        h.link.start()
        h.session(heartbeat_ms=3000)
        for job_id in (21, 22, 23):
            h.link.release((job_id, 1))
        a, b = h.expect("RELEASE"), h.expect("RELEASE")
        # The third waits its turn, not a time: nearly the whole reply timeout passes on the
        # link's clock with two unanswered, and it is still not sent.
        h.advance(1.9)
        self.assertEqual((h.link._in_flight(), h.link.pending()), (2, 3))
        self.assertEqual([r.kind for r in h.fake.kept], [])
        h.fake.accept(a, state="pending")
        c = h.expect("RELEASE")
        self.assertEqual([r.body["job_id"] for r in (a, b, c)], [21, 22, 23])

    def test_a_lost_session_fails_over_to_the_next_endpoint_and_round(self) -> None:
        h = self.harness(fakes=2, reply_timeout=0.2)
        first, second = h.fakes
        h.link.start()
        h.expect("HELLO", first)  # unanswered
        hello = h.expect("HELLO", second)
        second.welcome(hello)
        self.assertEqual(h.next_event(SessionReady).welcome.endpoint, second.endpoint)
        h.link.claim(1, 0)
        second.reply(h.expect("CLAIM", second), "ERROR", code="draining", text="going away")
        h.expect("HELLO", first)  # back to the first, a new round
        self.assertEqual(h.link.stats.reconnects, 2)

    def test_a_draining_coordinator_hands_the_session_and_the_outcome_to_the_next(
            self) -> None:
        h = self.harness(fakes=2)
        first, second = h.fakes
        h.link.start()
        h.session(first)
        h.link.complete((41, 3), "review:41")
        h.expect("COMPLETE", first)  # its answer is lost with the drain
        h.link.claim(1, 1000)
        first.reply(h.expect("CLAIM", first), "NO_WORK", reason="draining")
        self.assertEqual(h.next_event(ClaimEnded).reason, "draining")
        h.session(second)
        again = h.expect("COMPLETE", second)
        self.assertEqual((again.body["job_id"], again.body["generation"]), (41, 3))

    def test_a_lease_that_runs_out_unrenewed_is_lost_by_the_workers_clock(self) -> None:
        h = self.harness(manual_clock=True, reply_timeout=3.0)
        h.link.start()
        h.session(heartbeat_ms=50)
        granted = h.now  # before the worker receives the grant
        h.held_job(31, lease_ms=300)
        # RENEWs go unanswered: the lease holds until 300 ms of the link's clock have passed,
        # and not a moment longer than a few steps beyond.
        h.advance(0.29 - (h.now - granted))
        self.assertFalse([e for e in h.events if isinstance(e, JobLost)])
        lost = h.next_event(JobLost, timeout=2.0)
        self.assertGreaterEqual(h.now - granted, 0.3)
        self.assertLess(h.now - granted, 0.35)
        self.assertEqual((lost.job, lost.reason), ((31, 1), "lease_lost"))
        self.assertEqual(h.link.stats.lost_leases, 1)


if __name__ == "__main__":
    unittest.main()

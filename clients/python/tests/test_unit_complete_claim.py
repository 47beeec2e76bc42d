"""Protocol 1.2 in the worker against a scripted ROUTER: HELLO asks for ``complete_claim``, a
COMPLETE carries the next CLAIM only where WELCOME grants it (two requests otherwise), a
coordinator that cannot read HELLO's features is greeted again without them, and a COMPLETE
re-sent after a lost reply never carries the claim it carried. Both ends of a Link are driven
from this thread; the Worker test runs the worker on its own threads. Every wait has a
deadline."""

from __future__ import annotations

import json
import re
import time
import unittest
from typing import Any, List, Optional

import checkout

checkout.use()
from fake_coordinator import FakeCoordinator, Request  # noqa: E402
from test_unit_link import LIMIT, Harness  # noqa: E402
from test_unit_wire import PROTOCOL_MD  # noqa: E402

import zmq  # noqa: E402

import aclaim  # noqa: E402
from aclaim import Verdict, _wire  # noqa: E402
from aclaim._events import ClaimEnded, JobAssigned, SessionReady  # noqa: E402

FEATURE = "complete_claim"
# What HELLO asks for by default: complete_claim (1.2) and renew_held (1.3).
ASKED = [FEATURE, "renew_held"]


def welcome(h: Harness, hello: Request, features: Optional[List[str]]) -> SessionReady:
    """Answers HELLO with a WELCOME granting `features` (None: a WELCOME without the member,
    what a coordinator sends to a HELLO that asked for nothing, or a 1.1 coordinator)."""
    extra = {} if features is None else {"features": features}
    h.fake.reply(hello, "WELCOME", org_id=7, lease_ms=5000, heartbeat_ms=2000,
                 max_body_bytes=65536, **extra)
    return h.next_event(SessionReady)


def answer_claim(h: Harness, carrier: Request, req: int, job_id: int) -> None:
    """ASSIGNED for the claim a COMPLETE carried: its own req, on the carrier's connection."""
    h.fake.assign(Request(carrier.identity, "CLAIM", {"req": req}), job_id, lease_ms=5000)


class CompleteClaimLink(unittest.TestCase):
    def harness(self, fakes: int = 1, **options: Any) -> Harness:
        # Only complete_claim is asked for here (reconnect hints: test_unit_reconnect.py;
        # progress: test_unit_progress.py).
        options.setdefault("reconnect_hints", False)
        options.setdefault("progress", False)
        h = Harness(fakes, **options)
        self.addCleanup(h.close)
        return h

    def granted_session(self, h: Harness) -> Request:
        hello = h.expect("HELLO")
        self.assertEqual(hello.body["features"], ASKED)
        self.assertEqual(welcome(h, hello, [FEATURE]).welcome.features, (FEATURE,))
        self.assertTrue(h.link.granted(FEATURE))
        return hello

    def test_a_granted_completion_carries_the_next_claim_answered_in_turn(self) -> None:
        h = self.harness()
        h.link.start()
        self.granted_session(h)
        h.held_job(9, lease_ms=5000)
        done, nxt = h.link.complete_then_claim((9, 1), "review:9", 2, 500)
        self.assertGreater(nxt, done)
        sent = h.expect("COMPLETE")
        self.assertEqual(sent.req, done)
        self.assertEqual(sent.body["next"], [{"req": nxt, "max_jobs": 2, "wait_ms": 500}])
        self.assertTrue(h.link.claim_pending())
        self.assertEqual(h.link._in_flight(), 2)
        h.fake.accept(sent)
        answer_claim(h, sent, nxt, 11)
        v = h.next_event(Verdict)
        self.assertEqual((v.op, v.job_id, v.accepted), ("complete", 9, True))
        self.assertEqual(h.next_event(JobAssigned).job["job_id"], 11)
        self.assertFalse(h.link.claim_pending())
        self.assertEqual(h.link.pending(), 0)
        # Nothing went out alone: the DEALER delivers in order, so a CLAIM sent before the
        # RELEASE would be among what the fake received.
        self.assertNotIn("CLAIM", [r.kind for r in h.sent_so_far()])

    def test_a_rejected_completion_still_gets_its_claim_answered(self) -> None:
        h = self.harness()
        h.link.start()
        self.granted_session(h)
        h.held_job(9, lease_ms=5000)
        done, nxt = h.link.complete_then_claim((9, 1), "review:9", 1, 0)
        sent = h.expect("COMPLETE")
        h.fake.reply(sent, "REJECTED", job_id=9, generation=1, reason="stale_generation",
                     detail="current generation is 2")
        h.fake.reply(Request(sent.identity, "CLAIM", {"req": nxt}), "NO_WORK",
                     reason="no pending jobs")
        self.assertEqual(h.next_event(Verdict).reason, "stale_generation")
        self.assertEqual(h.next_event(ClaimEnded).why, "no_work")
        self.assertEqual(h.link.pending(), 0)

    def test_without_the_grant_the_completion_and_the_claim_are_two_requests(self) -> None:
        h = self.harness()
        h.link.start()
        hello = h.expect("HELLO")
        self.assertEqual(hello.body["features"], ASKED)
        self.assertEqual(welcome(h, hello, None).welcome.features, ())
        self.assertFalse(h.link.granted(FEATURE))
        h.held_job(9, lease_ms=5000)
        done, nxt = h.link.complete_then_claim((9, 1), "review:9", 2, 0)
        complete = h.expect("COMPLETE")
        self.assertEqual(complete.req, done)
        self.assertNotIn("next", complete.body)
        claim = h.expect("CLAIM")
        self.assertEqual((claim.req, claim.body["max_jobs"], claim.body["wait_ms"]), (nxt, 2, 0))

    def test_a_coordinator_that_cannot_read_the_features_is_greeted_as_1_1(self) -> None:
        h = self.harness()
        h.link.start()
        hello = h.expect("HELLO")
        self.assertEqual(hello.body["features"], ASKED)
        h.fake.reply(hello, "ERROR", code="undecodable",
                     text="HELLO body: unknown member 'features'")
        plain = h.expect("HELLO")
        self.assertNotIn("features", plain.body)
        self.assertNotEqual(plain.req, hello.req)
        self.assertEqual(plain.identity, hello.identity)  # the same connection, no back-off
        self.assertFalse(welcome(h, plain, None).reconnected)
        self.assertEqual(h.link.stats.reconnects, 0)
        h.held_job(9, lease_ms=5000)
        h.link.complete_then_claim((9, 1), "review:9", 1, 0)
        self.assertNotIn("next", h.expect("COMPLETE").body)
        h.expect("CLAIM")

    def test_an_undecodable_answer_to_a_plain_hello_is_still_a_refusal(self) -> None:
        h = self.harness(complete_claim=False, renew_held=False)
        h.link.start()
        hello = h.expect("HELLO")
        self.assertNotIn("features", hello.body)
        h.fake.reply(hello, "ERROR", code="undecodable", text="HELLO body: broken")
        with self.assertRaises(aclaim.WorkerError) as e:
            h.next_event(SessionReady)
        self.assertEqual(e.exception.code, "undecodable")

    def test_a_lost_completion_is_resent_without_the_claim_it_carried(self) -> None:
        h = self.harness()
        h.link.start()
        first = self.granted_session(h)
        h.held_job(9, lease_ms=5000)
        done, _ = h.link.complete_then_claim((9, 1), "review:9", 1, 0)
        lost = h.expect("COMPLETE")  # never answered
        self.assertEqual(len(lost.body["next"]), 1)
        # No reply within the reply timeout: the claim is reported lost, as a lost CLAIM is.
        self.assertEqual(h.next_event(ClaimEnded).why, "connection_lost")
        second = h.expect("HELLO")
        self.assertNotEqual(second.identity, first.identity)
        h.fake.kept.clear()  # what the old connection sent
        welcome(h, second, [FEATURE])
        again = h.expect("COMPLETE")
        self.assertEqual(again.req, done)
        self.assertNotIn("next", again.body)
        h.fake.accept(again, replayed=True)
        self.assertTrue(h.next_event(Verdict).replayed)
        self.assertFalse(h.link.claim_pending())
        self.assertEqual(h.link.stats.resent, 1)

    def test_a_refusal_answers_both_and_only_the_completion_is_resent(self) -> None:
        h = self.harness(retry_delay=0.01)
        h.link.start()
        self.granted_session(h)
        h.held_job(9, lease_ms=5000)
        done, nxt = h.link.complete_then_claim((9, 1), "review:9", 1, 0)
        sent = h.expect("COMPLETE")
        for req in (done, nxt):
            h.fake.reply(Request(sent.identity, "?", {"req": req}), "ERROR",
                         code="too_many_requests", text="this session already has 64 requests")
        self.assertEqual(h.next_event(ClaimEnded).why, "error")
        again = h.expect("COMPLETE")
        self.assertEqual(again.req, done)
        self.assertNotIn("next", again.body)
        h.fake.accept(again)
        self.assertTrue(h.next_event(Verdict).accepted)
        self.assertEqual(h.link.pending(), 0)

    def test_a_draining_coordinator_answers_the_claim_and_the_completion_moves_on(
            self) -> None:
        h = self.harness(fakes=2)
        first, second = h.fakes
        h.link.start()
        hello = h.expect("HELLO", first)
        first.reply(hello, "WELCOME", org_id=7, lease_ms=5000, heartbeat_ms=2000,
                    max_body_bytes=65536, features=[FEATURE])
        h.next_event(SessionReady)
        h.link.claim(1, 0)
        first.assign(h.expect("CLAIM", first), 9, lease_ms=5000)
        h.next_event(JobAssigned)
        done, nxt = h.link.complete_then_claim((9, 1), "review:9", 1, 1000)
        sent = h.expect("COMPLETE", first)
        # During a drain the claim is answered at once, before the completion's answer.
        first.reply(Request(sent.identity, "CLAIM", {"req": nxt}), "NO_WORK", reason="draining")
        self.assertEqual(h.next_event(ClaimEnded).reason, "draining")
        hello = h.expect("HELLO", second)
        self.assertEqual(hello.body["features"], ASKED)
        second.welcome(hello)
        again = h.expect("COMPLETE", second)
        self.assertEqual(again.req, done)
        self.assertNotIn("next", again.body)


class WireTest(unittest.TestCase):
    def frames(self, **body: Any) -> List[bytes]:
        return [_wire.TAG, b"WELCOME", json.dumps(body).encode()]

    def test_welcome_features_are_an_optional_array_of_names(self) -> None:
        base = {"req": 1, "org_id": 7, "lease_ms": 1000, "heartbeat_ms": 300,
                "max_body_bytes": 65536}
        self.assertNotIn("features", _wire.decode(self.frames(**base))[1])
        kind, body = _wire.decode(self.frames(**base, features=[FEATURE]))
        self.assertEqual((kind, body["features"]), ("WELCOME", [FEATURE]))
        with self.assertRaises(_wire.WireError):
            _wire.decode(self.frames(**base, features=FEATURE))
        with self.assertRaises(_wire.WireError):
            _wire.decode(self.frames(**base, features=[1]))

    def test_the_protocol_1_2_examples_are_what_the_link_sends_and_reads(self) -> None:
        with open(PROTOCOL_MD, encoding="utf-8") as f:
            lines = re.findall(r"^([A-Z_]+) +(\{.*\})$", f.read(), re.M)
        # Protocol 1.3's examples (RENEW's held, renew_held) are test_unit_renew_held's, and 1.4's
        # (reconnect_hints) are read in test_unit_reconnect.py.
        newer = {k: json.loads(b) for k, b in lines if ('"features"' in b or '"next"' in b)
                 and "renew_held" not in b and '"held"' not in b and "reconnect_hints" not in b}
        self.assertEqual(sorted(newer), ["COMPLETE", "HELLO", "WELCOME"])
        self.assertEqual(newer["HELLO"]["features"], [FEATURE])
        self.assertEqual(_wire.decode([_wire.TAG, b"WELCOME", json.dumps(newer["WELCOME"])
                                       .encode()])[1]["features"], [FEATURE])
        carried = newer["COMPLETE"]["next"]
        self.assertEqual((len(carried), sorted(carried[0])), (1, ["max_jobs", "req", "wait_ms"]))


class CompleteClaimWorker(unittest.TestCase):
    def setUp(self) -> None:
        self.ctx = zmq.Context()
        self.fake = FakeCoordinator(self.ctx)
        self.addCleanup(self.ctx.term)
        self.addCleanup(self.fake.close)

    def worker(self, **options: Any) -> aclaim.Worker:
        options.setdefault("reconnect_hints", False)
        options.setdefault("progress", False)
        w = aclaim.Worker(self.fake.endpoint, "rev-1", org_id=7, context=self.ctx,
                          reply_timeout=2.0, claim_wait=0.1, stop_timeout=2.0, **options)
        w.start(lambda job: f"review:{job.job_id}")
        self.addCleanup(lambda: w.stop(timeout=LIMIT) if w._thread and w._thread.is_alive()
                        else None)
        return w

    def stop(self, w: aclaim.Worker) -> None:
        """Stops the worker while the fake answers (RENEW with LEASE, CLAIM with NO_WORK)."""
        self.fake.serve_in_background()
        w.stop(wait=False)
        deadline = time.monotonic() + LIMIT
        while w._thread is not None and w._thread.is_alive() and time.monotonic() < deadline:
            r = self.fake.receive(0.02)
            if r is not None:
                self.fake.kept.append(r)
        self.assertTrue(w.join(LIMIT))

    def test_the_worker_asks_for_its_next_job_with_the_completion(self) -> None:
        w = self.worker(concurrency=2)
        hello = self.fake.expect("HELLO")
        self.assertEqual(hello.body["features"], ASKED)
        self.fake.reply(hello, "WELCOME", org_id=7, lease_ms=5000, heartbeat_ms=2000,
                        max_body_bytes=65536, features=[FEATURE])
        claim = self.fake.expect("CLAIM")
        self.assertEqual(claim.body["max_jobs"], 2)
        self.fake.assign(claim, 1, lease_ms=5000)
        complete = self.fake.expect("COMPLETE")
        # Its own job counted as done: both slots are free for the next claim.
        self.assertEqual(complete.body["next"],
                         [{"req": complete.req + 1, "max_jobs": 2, "wait_ms": 100}])
        self.fake.accept(complete)
        self.fake.assign(Request(complete.identity, "CLAIM", {"req": complete.req + 1}), 2,
                         lease_ms=5000)
        second = self.fake.expect("COMPLETE")
        self.assertEqual(second.body["job_id"], 2)
        self.assertIn("next", second.body)
        self.fake.accept(second)
        self.fake.reply(Request(second.identity, "CLAIM", second.body["next"][0]), "NO_WORK",
                        reason="no pending jobs")
        self.stop(w)
        self.assertEqual((w.stats.claimed, w.stats.completed), (2, 2))
        self.assertEqual(w.welcome.features, (FEATURE,))

    def test_complete_claim_and_renew_held_false_ask_for_nothing(self) -> None:
        w = self.worker(complete_claim=False, renew_held=False)
        hello = self.fake.expect("HELLO")
        self.assertNotIn("features", hello.body)
        self.fake.welcome(hello)
        self.assertTrue(w.wait_ready(LIMIT))
        self.stop(w)


if __name__ == "__main__":
    unittest.main()

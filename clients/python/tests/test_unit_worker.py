"""The Worker (threads, handler, outcomes, stop) against a scripted ROUTER: what each way a
handler ends sends, a lease lost by the worker's clock, the graceful stop and its deadline, a
HELLO refused for good. The worker runs on its own threads; this thread plays the coordinator.
Every wait has a deadline."""

from __future__ import annotations

import threading
import unittest
from typing import Any

import zmq

import checkout

checkout.use()
from fake_coordinator import FakeCoordinator, Request  # noqa: E402

import aclaim  # noqa: E402

LIMIT = 5.0


class WorkerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ctx = zmq.Context()
        self.fake = FakeCoordinator(self.ctx)
        self.addCleanup(self.ctx.term)
        self.addCleanup(self.fake.close)

    def worker(self, handler: aclaim.Handler, **options: Any) -> aclaim.Worker:
        options.setdefault("reply_timeout", 2.0)
        options.setdefault("claim_wait", 0.1)
        options.setdefault("stop_timeout", 2.0)
        w = aclaim.Worker(self.fake.endpoint, "rev-1", org_id=7, context=self.ctx, **options)
        w.start(handler)
        self.addCleanup(lambda: w.stop(timeout=LIMIT) if w._thread and w._thread.is_alive()
                        else None)
        return w

    def session(self, heartbeat_ms: int = 100, lease_ms: int = 1000) -> Request:
        hello = self.fake.expect("HELLO")
        self.fake.welcome(hello, lease_ms=lease_ms, heartbeat_ms=heartbeat_ms)
        return hello

    def give(self, job_id: int, lease_ms: int = 1000, payload: str = "doc") -> None:
        self.fake.assign(self.fake.expect("CLAIM"), job_id, lease_ms=lease_ms, payload=payload)



class Outcomes(WorkerTest):
    def test_each_way_a_handler_ends_sends_its_outcome(self) -> None:
        def review(job: aclaim.Job) -> Any:
            if job.payload == "unreadable":
                raise aclaim.FailJob("scan unreadable", retryable=False)
            if job.payload == "crash":
                raise RuntimeError("model timed out")
            if job.payload == "later":
                raise aclaim.ReleaseJob()
            if job.payload == "number":
                return 42
            return f"review:{job.job_id}"

        verdicts = []
        w = self.worker(review, on_verdict=verdicts.append)
        self.session()
        expected = {
            1: ("COMPLETE", {"result_ref": "review:1"}),
            2: ("FAIL", {"reason": "scan unreadable", "retryable": False}),
            3: ("FAIL", {"reason": "RuntimeError: model timed out", "retryable": True}),
            4: ("RELEASE", {}),
            5: ("FAIL", {"retryable": True}),
        }
        payloads = {1: "ok", 2: "unreadable", 3: "crash", 4: "later", 5: "number"}
        for job_id, (kind, fields) in expected.items():
            self.give(job_id, payload=payloads[job_id])
            r = self.fake.expect(kind)
            self.assertEqual((r.body["job_id"], r.body["generation"]), (job_id, 1))
            for name, value in fields.items():
                self.assertEqual(r.body[name], value, (job_id, name))
            self.fake.accept(r, state="done")
        self.assertIn("no usable result_ref", r.body["reason"])
        w.stop(timeout=LIMIT)
        self.assertEqual([v.job_id for v in verdicts], [1, 2, 3, 4, 5])
        self.assertEqual((w.stats.completed, w.stats.failed, w.stats.released,
                          w.stats.handler_errors), (1, 3, 1, 2))

    def test_a_lease_lost_by_the_workers_clock_cancels_the_handler_which_releases_it(
            self) -> None:
        seen = []

        def review(job: aclaim.Job) -> str:
            seen.append(job.cancellation.wait(LIMIT) and job.cancellation.reason)
            job.cancellation.raise_if_cancelled()
            return "too late"

        w = self.worker(review, reply_timeout=3.0)
        self.session(heartbeat_ms=50)
        self.give(8, lease_ms=300)  # and its RENEWs are never answered
        release = self.fake.expect("RELEASE")
        self.assertEqual(seen, ["lease_lost"])
        self.assertEqual(release.body["job_id"], 8)
        self.fake.reply(release, "REJECTED", job_id=8, generation=1, reason="lease_expired",
                        detail="the lease was taken back")
        self.fake.serve_in_background()
        w.stop(timeout=LIMIT)
        self.assertEqual(dict(w.stats.rejected), {"lease_expired": 1})


class Stopping(WorkerTest):
    def test_a_graceful_stop_lets_the_running_review_finish(self) -> None:
        started, finish = threading.Event(), threading.Event()

        def review(job: aclaim.Job) -> str:
            started.set()
            self.assertTrue(finish.wait(LIMIT))
            return "review:finished"

        w = self.worker(review)
        self.session()
        self.give(9)
        self.assertTrue(started.wait(LIMIT))
        w.stop(wait=False)
        finish.set()
        done = self.fake.expect("COMPLETE")
        self.assertEqual(done.body["result_ref"], "review:finished")
        self.fake.accept(done)
        self.fake.expect("BYE")
        w.stop(timeout=LIMIT)
        self.assertEqual(w.stats.completed, 1)

    def test_stop_with_cancel_tells_the_handler_and_releases_the_job(self) -> None:
        reasons = []
        started = threading.Event()

        def review(job: aclaim.Job) -> str:
            started.set()
            job.cancellation.wait(LIMIT)
            reasons.append(job.cancellation.reason)
            raise aclaim.Cancelled(job.cancellation.reason)

        w = self.worker(review)
        self.session()
        self.give(10)
        self.assertTrue(started.wait(LIMIT))
        self.fake.serve_in_background()
        w.stop(cancel=True, wait=False)
        release = self.fake.expect("RELEASE")
        self.assertEqual(release.body["job_id"], 10)
        self.fake.accept(release, state="pending")
        self.fake.expect("BYE")
        w.stop(timeout=LIMIT)
        self.assertEqual(reasons, ["stopping"])

    def test_a_handler_still_running_at_the_stop_deadline_has_its_job_released(self) -> None:
        started, finish = threading.Event(), threading.Event()
        self.addCleanup(finish.set)

        def review(job: aclaim.Job) -> str:
            started.set()
            finish.wait(LIMIT)  # ignores its cancellation
            return "review:ignored"

        w = self.worker(review, stop_timeout=0.2)
        self.session()
        self.give(11)
        self.assertTrue(started.wait(LIMIT))
        self.fake.serve_in_background()
        w.stop(wait=False)
        release = self.fake.expect("RELEASE")
        self.fake.accept(release, state="pending")
        self.fake.expect("BYE")
        w.stop(timeout=LIMIT)
        self.assertEqual(w.stats.released, 1)

    def test_a_job_granted_while_stopping_is_released_unreviewed(self) -> None:
        reviewed = []
        w = self.worker(reviewed.append)
        self.session()
        claim = self.fake.expect("CLAIM")
        w.stop(wait=False)  # the claim is answered after the stop began
        self.fake.assign(claim, 12)
        release = self.fake.expect("RELEASE")
        self.assertEqual(release.body["job_id"], 12)
        self.fake.accept(release, state="pending")
        self.fake.expect("BYE")
        w.stop(timeout=LIMIT)
        self.assertEqual(reviewed, [])

    def test_a_hello_refused_for_good_ends_the_worker_with_its_reason(self) -> None:
        w = self.worker(lambda job: "never")
        hello = self.fake.expect("HELLO")
        self.fake.reply(hello, "ERROR", code="queue_not_allowed",
                        text="the key may serve only electrical")
        with self.assertRaises(aclaim.WorkerError) as e:
            w.join(LIMIT)
        self.assertEqual(e.exception.code, "queue_not_allowed")
        self.assertFalse(w.wait_ready(0))

    def test_bad_settings_are_refused_before_anything_is_sent(self) -> None:
        with self.assertRaisesRegex(ValueError, "printable ASCII"):
            aclaim.Worker("tcp://127.0.0.1:1", "rev\n1", org_id=1)
        with self.assertRaisesRegex(ValueError, "queue name"):
            aclaim.Worker("tcp://127.0.0.1:1", "rev-1", org_id=1, queues=["-bad"])
        with self.assertRaisesRegex(ValueError, "org_id"):
            aclaim.Worker("tcp://127.0.0.1:1", "rev-1")
        with self.assertRaisesRegex(ValueError, "claim wait"):
            aclaim.Worker("tcp://127.0.0.1:1", "rev-1", org_id=1, claim_wait=61)


if __name__ == "__main__":
    unittest.main()

"""Protocol 1.5 between the Worker and a real coordinator (plaintext or under CURVE): a handler
reports progress with a checkpoint and then gives the job up without completing it (its holder
"dies": the worker stops renewing it); after the reaper takes the lease back, the next worker's
handler gets the checkpoint in ``job.resume`` and completes the job. A stale holder's report is
refused. That the refusal changes nothing and the bounds are the pg suite's part
(store_progress_tests.cpp)."""

from __future__ import annotations

import threading
import unittest

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import Cluster, Verdicts, close_checked, unique, wait_for

import aclaim

# A lease of 1 s renewed every 300 ms, a reaper every 100 ms: a lapse is reclaimed at once.
LEASE_FLAGS = ("--lease-ms", "1000", "--heartbeat-ms", "300", "--reap-interval-ms", "100")

cluster: Cluster
main: str


def setUpModule() -> None:
    global cluster, main
    cluster = Cluster("progress")
    main = cluster.coordinator(*LEASE_FLAGS).endpoint


def tearDownModule() -> None:
    close_checked(cluster)


class Progress(unittest.TestCase):
    def test_the_next_holder_resumes_from_the_checkpoint(self) -> None:
        queue = unique("q")
        job_id = cluster.enqueue(queue, unique("doc"))
        saved = threading.Event()
        lost = threading.Event()
        seen = {}

        def first_review(job: aclaim.Job) -> str:
            if "first" in seen:
                # The first worker may claim the job again after the reclaim, before the test
                # stops it: that claim reports nothing and ends with the worker (released).
                job.cancellation.wait(10)
                raise aclaim.Cancelled(job.cancellation.reason)
            seen["first"] = job.resume
            job.progress(60, "checked the wiring", checkpoint="step=6")
            saved.set()
            # The holder "dies" here: no more renewals, and the reaper takes the job back.
            first.stop_renewing(job)
            job.cancellation.wait(10)
            lost.set()
            raise aclaim.Cancelled(job.cancellation.reason)

        first = cluster.worker(unique("py-a"), [main], [queue])
        first.start(first_review)
        self.addCleanup(first.stop)
        self.assertTrue(first.wait_ready(10), "no session with the coordinator")
        self.assertIn("progress", first.welcome.features)
        self.assertTrue(saved.wait(10))
        wait_for("the checkpoint saved", lambda: cluster.scalar(
            "SELECT checkpoint FROM job_progress WHERE job_id = %s", job_id) == "step=6")
        self.assertTrue(lost.wait(10), "the lease was not taken back")
        first.stop()

        verdicts = Verdicts()

        def second_review(job: aclaim.Job) -> str:
            seen["second"] = job.resume
            seen["second generation"] = job.generation
            job.progress(90, "nearly done", checkpoint="step=9")
            # Reports and outcomes are pipelined: one sent just before the COMPLETE may reach the
            # database after it (and be refused already_terminal). Wait for this one to land.
            wait_for("the second holder's checkpoint", lambda: cluster.scalar(
                "SELECT generation FROM job_progress WHERE job_id = %s",
                job.job_id) == job.generation)
            return f"review:{job.job_id}"

        second = cluster.worker(unique("py-b"), [main], [queue], on_verdict=verdicts)
        second.start(second_review)
        self.addCleanup(second.stop)
        [v] = verdicts.wait(job_id)
        # Generation 2 unless the first worker claimed the job again before it stopped.
        self.assertGreaterEqual(seen["second generation"], 2)
        self.assertEqual((v.accepted, v.state, v.generation),
                         (True, "completed", seen["second generation"]), v)
        self.assertIsNone(seen["first"])
        resume = seen["second"]
        self.assertIsNotNone(resume)
        self.assertEqual((resume.generation, resume.percent, resume.note, resume.checkpoint),
                         (1, 60, "checked the wiring", "step=6"))
        self.assertEqual(cluster.scalar(
            "SELECT count(*) FROM job_events WHERE job_id = %s AND kind = 'checkpoint'",
            job_id), 2)


if __name__ == "__main__":
    unittest.main()

"""Protocol 1.3 between the Worker and a real coordinator (plaintext or under CURVE): the
session grants renew_held, and a worker holding four jobs for more than two leases keeps them all
with its heartbeat RENEWs naming every held job (each answered LEASE on its own); none is
reclaimed. A worker that does not ask renews each job alone, as before. That the heartbeat is one
RENEW for all held jobs is the unit tests' part, and its count the pg suite's
(coordinator_renew_held_tests.cpp)."""

from __future__ import annotations

import threading
import unittest

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import Cluster, Verdicts, close_checked, unique

import aclaim

# A lease of 1 s renewed every 300 ms, a reaper every 100 ms: a lapse would show at once.
LEASE_FLAGS = ("--lease-ms", "1000", "--heartbeat-ms", "300", "--reap-interval-ms", "100")

cluster: Cluster
main: str


def setUpModule() -> None:
    global cluster, main
    cluster = Cluster("renew_held")
    main = cluster.coordinator(*LEASE_FLAGS).endpoint


def tearDownModule() -> None:
    close_checked(cluster)


class RenewHeld(unittest.TestCase):
    def hold_four(self, **options) -> aclaim.Worker:  # type: ignore[no-untyped-def]
        queue = unique("q")
        verdicts = Verdicts()
        ids = [cluster.enqueue(queue, unique("doc")) for _ in range(4)]
        all_in = threading.Barrier(4, timeout=10)

        def review(job: aclaim.Job) -> str:
            all_in.wait()  # all four held at once
            # Held for 2.2 leases: only renewals keep the jobs. A revocation ends the wait.
            cancelled = job.cancellation.wait(2.2)
            return "cancelled" if cancelled else f"review:{job.job_id}"

        w = cluster.worker(unique("py"), [main], [queue], on_verdict=verdicts, concurrency=4,
                           **options)
        w.start(review)
        self.addCleanup(w.stop)
        self.assertTrue(w.wait_ready(10), "no session with the coordinator")
        for job_id in ids:
            [v] = verdicts.wait(job_id)
            self.assertEqual((v.accepted, v.state), (True, "completed"), v)
            self.assertEqual(cluster.job(job_id)["generation"], 1)  # never reclaimed
        # About seven heartbeats for each of four jobs, each answered LEASE.
        self.assertGreaterEqual(w.stats.renewals, 16)
        return w

    def test_four_held_jobs_are_kept_by_one_heartbeat(self) -> None:
        w = self.hold_four()
        self.assertIn("renew_held", w.welcome.features)

    def test_a_worker_that_does_not_ask_renews_each_job(self) -> None:
        w = self.hold_four(renew_held=False)
        self.assertNotIn("renew_held", w.welcome.features)


if __name__ == "__main__":
    unittest.main()

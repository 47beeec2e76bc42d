"""Protocol 1.2 between the Worker and a real coordinator (plaintext or under CURVE): the session
grants complete_claim, the reviewer serves its jobs with it, and the first job's completion and the
second job's claim are committed in one transaction (coalescing and skip-locked claims, the
coordinator's defaults); a worker that asks for nothing gets a 1.1 session and still serves its
jobs. The transaction alone does not tell a carried claim from one sent right after its COMPLETE
(coalescing mixes those too): that the claim rides inside the COMPLETE is the unit tests' part."""

from __future__ import annotations

import unittest

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import Cluster, Verdicts, close_checked, plaintext_only, unique

import aclaim

cluster: Cluster
main: str


def setUpModule() -> None:
    global cluster, main
    cluster = Cluster("complete_claim")
    main = cluster.coordinator().endpoint


def tearDownModule() -> None:
    close_checked(cluster)


class CompleteClaim(unittest.TestCase):
    def setUp(self) -> None:
        self.queue = unique("q")
        self.verdicts = Verdicts()

    def serve(self, jobs: int, **options) -> aclaim.Worker:  # type: ignore[no-untyped-def]
        ids = [cluster.enqueue(self.queue, unique("doc")) for _ in range(jobs)]
        w = cluster.worker(unique("py"), [main], [self.queue], on_verdict=self.verdicts,
                           **options)
        w.start(lambda job: f"review:{job.job_id}")
        self.addCleanup(w.stop)
        self.assertTrue(w.wait_ready(10), "no session with the coordinator")
        for job_id in ids:
            [v] = self.verdicts.wait(job_id)
            self.assertEqual((v.accepted, v.state), (True, "completed"), v)
        self.ids = ids
        return w

    def test_the_completion_and_the_next_claim_commit_together(self) -> None:
        w = self.serve(2, concurrency=1)
        self.assertEqual(w.welcome.features,
                         ("complete_claim", "renew_held", "reconnect_hints", "progress"))
        first, second = self.ids
        # The first job's completion and the second job's claim: one transaction.
        txids = cluster.rows(
            "SELECT DISTINCT xmin::text FROM job_events WHERE (job_id = %s AND kind = 'completed')"
            " OR (job_id = %s AND kind = 'claimed')", first, second)
        self.assertEqual(len(txids), 1, txids)
        self.assertEqual(w.stats.completed, 2)

    @plaintext_only
    def test_a_worker_that_asks_for_nothing_gets_a_1_1_session(self) -> None:
        w = self.serve(2, concurrency=1, complete_claim=False, renew_held=False,
                       reconnect_hints=False, progress=False)
        self.assertEqual(w.welcome.features, ())
        self.assertEqual(w.stats.completed, 2)


if __name__ == "__main__":
    unittest.main()

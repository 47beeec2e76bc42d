"""A queue's rate limit (`aclaimctl queue set --rate R --burst B`) held across two coordinator
processes: four workers, two on each coordinator, take jobs from one rate-limited queue as fast as
they are given them. Over every window of the claims' audit times, no more jobs were claimed than
the burst plus the rate times the window; the claims kept pace with the rate (the parked claims
were retried at the refill, not left waiting); both coordinators handed out jobs; the checker's
`rate_respected` holds with the others. The bucket's arithmetic under contention is the pg suite's part
(store_rate_limit_tests.cpp)."""

from __future__ import annotations

import unittest

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import ORG, Cluster, Verdicts, close_checked, unique

RATE = 20.0  # jobs a second
BURST = 5
JOBS = 125  # the burst, then six seconds at the rate

cluster: Cluster
endpoints: list


def setUpModule() -> None:
    global cluster, endpoints
    cluster = Cluster("rate")
    endpoints = [cluster.coordinator().endpoint, cluster.coordinator().endpoint]


def tearDownModule() -> None:
    close_checked(cluster)


class RateLimit(unittest.TestCase):
    def test_two_coordinators_never_exceed_the_rate(self) -> None:
        queue = unique("q")
        payloads = [unique("doc") for _ in range(JOBS)]
        cluster.rows("SELECT count(*) FROM aclaim_enqueue_many(%s::text[], %s::text[], org => %s)",
                     payloads, [queue] * JOBS, ORG)
        cluster.ctl("queue", "set", queue, "--org", str(ORG), "--rate", str(RATE),
                    "--burst", str(BURST))
        ids = [r[0] for r in cluster.rows(
            "SELECT id FROM jobs WHERE queue = %s ORDER BY id", queue)]
        self.assertEqual(len(ids), JOBS)

        verdicts = Verdicts()
        workers = []
        for i in range(4):
            w = cluster.worker(unique(f"py-{i}"), [endpoints[i % 2]], [queue],
                               on_verdict=verdicts, concurrency=4)
            w.start(lambda job: f"review:{job.job_id}")
            self.addCleanup(w.stop)
            workers.append(w)
        for w in workers:
            self.assertTrue(w.wait_ready(10), "no session with a coordinator")
        for job_id in ids:
            [v] = verdicts.wait(job_id, timeout=JOBS / RATE + 20)
            self.assertEqual((v.accepted, v.state), (True, "completed"), v)

        claims = [r[0] for r in cluster.rows(
            "SELECT aclaim_us(at) FROM job_events e JOIN jobs j ON j.id = e.job_id "
            "WHERE j.queue = %s AND e.kind = 'claimed' ORDER BY 1", queue)]
        self.assertEqual(len(claims), JOBS)  # one claim each: nothing was reclaimed
        # Every window that starts at a claim: at most the burst plus what the window refilled.
        worst = 0.0
        for i, start in enumerate(claims):
            for j in range(i, len(claims)):
                window_s = (claims[j] - start) / 1e6
                allowed = BURST + RATE * window_s
                worst = max(worst, (j - i + 1) - allowed)
                self.assertLessEqual(j - i + 1, allowed + 1e-9,
                                     f"{j - i + 1} claims in {window_s:.3f} s")
        # The claims kept pace: the whole run at no less than 80% of the rate after the burst.
        span_s = (claims[-1] - claims[0]) / 1e6
        self.assertGreaterEqual((JOBS - BURST) / span_s, 0.8 * RATE,
                                f"{JOBS} claims took {span_s:.2f} s")
        # Both coordinators handed out jobs (each worker talks to one of them).
        by_worker = {r[0]: r[1] for r in cluster.rows(
            "SELECT worker, count(*) FROM job_events e JOIN jobs j ON j.id = e.job_id "
            "WHERE j.queue = %s AND e.kind = 'claimed' GROUP BY worker", queue)}
        per_coordinator = [sum(n for name, n in by_worker.items()
                               if name == workers[i].worker_id or
                               name == workers[i + 2].worker_id) for i in range(2)]
        self.assertTrue(all(n > 0 for n in per_coordinator), per_coordinator)
        self.assertIn("OK: every invariant holds", cluster.check())  # rate_respected among them


if __name__ == "__main__":
    unittest.main()

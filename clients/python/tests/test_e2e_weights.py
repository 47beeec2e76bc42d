"""Weighted queues and aging (`aclaimctl queue set --weight W --aging S`) between two coordinator
processes and workers that take jobs as fast as they are given them:

- two full queues weighted 3:1, served by four workers on the two coordinators, are handed out
  within 10% of 3:1 while both have work;
- under a flood of high-priority jobs that never lets up, a low-priority job of an aged queue is
  claimed within its bound ((H - p) x S + the pass interval after its run_at), ahead of the
  younger flood, where without aging it would wait for the flood to end.

The stride arithmetic, the coalesced claims and the aging pass on the injected clock are the pg
suite's part (store_weights_tests.cpp)."""

from __future__ import annotations

import sys
import threading
import time
import unittest

import psycopg2

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import ORG, Cluster, close_checked, unique

AGING_INTERVAL_MS = 200

cluster: Cluster
endpoints: list


def setUpModule() -> None:
    global cluster, endpoints
    cluster = Cluster("weights")
    flags = ("--aging-interval-ms", str(AGING_INTERVAL_MS))
    endpoints = [cluster.coordinator(*flags).endpoint, cluster.coordinator(*flags).endpoint]


def tearDownModule() -> None:
    close_checked(cluster)


def enqueue_many(queue: str, count: int, priority: int = 0) -> None:
    cluster.rows("SELECT count(*) FROM aclaim_enqueue_many(%s::text[], %s::text[], %s::int[], "
                 "org => %s)", [unique("doc") for _ in range(count)], [queue] * count,
                 [priority] * count, ORG)


def claims_of(*queues: str) -> list:
    """(queue, job id, claim time in us) of every claim on the queues, in the log's order."""
    return cluster.rows(
        "SELECT j.queue, e.job_id, aclaim_us(e.at) FROM job_events e JOIN jobs j ON j.id = e.job_id"
        " WHERE j.queue = ANY(%s) AND e.kind = 'claimed' ORDER BY e.id", list(queues))


class Weights(unittest.TestCase):
    def start_workers(self, count: int, queues: list, concurrency: int) -> list:
        workers = []
        for i in range(count):
            w = cluster.worker(unique(f"py-{i}"), [endpoints[i % 2]], queues,
                               concurrency=concurrency)
            w.start(lambda job: f"review:{job.job_id}")
            self.addCleanup(w.stop)
            workers.append(w)
        for w in workers:
            self.assertTrue(w.wait_ready(10), "no session with a coordinator")
        return workers

    def test_two_weighted_queues_are_served_within_ten_percent_of_their_weights(self) -> None:
        a, b = unique("heavy"), unique("light")
        enqueue_many(a, 300)
        enqueue_many(b, 300)
        cluster.ctl("queue", "set", a, "--org", str(ORG), "--weight", "3")
        cluster.ctl("queue", "set", b, "--org", str(ORG), "--weight", "1")
        workers = self.start_workers(4, [a, b], concurrency=2)
        # 240 claims: at 3:1 that is 180 of a and 60 of b, so both still have work throughout.
        deadline = time.monotonic() + 60
        while len(claims_of(a, b)) < 240 and time.monotonic() < deadline:
            time.sleep(0.05)
        for w in workers:
            w.stop()
        claims = claims_of(a, b)[:240]
        self.assertEqual(len(claims), 240, "the workers did not claim 240 jobs within 60 s")
        of_a = sum(1 for q, _, _ in claims if q == a)
        of_b = len(claims) - of_a
        ratio = of_a / of_b
        print(f"weights 3:1 over the first 240 claims: {of_a} to {of_b} = {ratio:.2f}",
              file=sys.stderr)
        self.assertLessEqual(abs(ratio - 3.0), 0.3, f"{of_a} of {a} against {of_b} of {b}")
        # Neither queue ran out while the first 240 were handed out.
        self.assertLess(of_a, 300)
        self.assertLess(of_b, 300)

    def test_an_aged_low_priority_job_is_claimed_within_its_bound_under_a_flood(self) -> None:
        queue = unique("aged")
        high, aging_s, rate = 5, 1, 20
        enqueue_many(queue, 40, high)  # older than the low job: they may go first
        cluster.ctl("queue", "set", queue, "--org", str(ORG), "--aging", f"{aging_s}s",
                    "--rate", str(rate), "--burst", "1")
        low = cluster.enqueue(queue, unique("low"), "--priority", "0")
        stop = threading.Event()

        def flood() -> None:  # 25 high-priority jobs a second against 20 claims a second
            conn = psycopg2.connect(cluster.dsn)
            conn.autocommit = True
            try:
                with conn.cursor() as cur:
                    while not stop.wait(0.04):
                        cur.execute("SELECT id FROM aclaim_enqueue(payload => %s, queue => %s, "
                                    "priority => %s, org => %s)", (unique("flood"), queue, high,
                                                                   ORG))
            finally:
                conn.close()

        producer = threading.Thread(target=flood, name="flood")
        producer.start()
        self.addCleanup(producer.join)
        self.addCleanup(stop.set)
        self.start_workers(2, [queue], concurrency=2)
        bound_s = (high - 0) * aging_s + AGING_INTERVAL_MS / 1000
        deadline = time.monotonic() + bound_s + 10
        while cluster.job(low)["state"] == "pending" and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        producer.join()
        run_at_us, claimed_us = cluster.rows(
            "SELECT aclaim_us(run_at), aclaim_us(claimed_at) FROM jobs WHERE id = %s", low)[0]
        self.assertIsNotNone(claimed_us, f"the low-priority job still waits after {bound_s + 10} s")
        waited_s = (claimed_us - run_at_us) / 1e6
        print(f"aged job claimed {waited_s:.2f} s after its run_at (bound {bound_s:.1f} s)",
              file=sys.stderr)
        # The bound, and one claim interval of the rate and a second for the processes' clocks.
        self.assertLessEqual(waited_s, bound_s + 1 / rate + 1.0)
        # It was aged past the flood: younger high-priority jobs were still pending when it was
        # claimed (without aging it would have waited for every one of them).
        younger_after = cluster.scalar(
            "SELECT count(*) FROM jobs WHERE queue = %s AND id <> %s AND run_at > "
            "aclaim_ts(%s) AND (claimed_at IS NULL OR claimed_at > aclaim_ts(%s))",
            queue, low, run_at_us, claimed_us)
        self.assertGreater(younger_after, 0)
        self.assertEqual(cluster.scalar(
            "SELECT base_priority FROM jobs WHERE id = %s", low), 0)
        self.assertGreater(cluster.scalar("SELECT priority FROM jobs WHERE id = %s", low), 0)
        self.assertIn("OK: every invariant holds", cluster.check())  # aging_bound_kept too


if __name__ == "__main__":
    unittest.main()

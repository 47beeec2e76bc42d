"""Separation of duties (`exclude_keys`, `exclude_completers_of`) between two coordinator
processes and reviewers that take jobs as fast as they are given them, under CURVE (the reviewer is
the name its key is registered under) or plaintext (the name it says):

- each piece of work has a review that excludes whoever completed the work: every review is
  completed by the other reviewer;
- jobs that exclude both connected reviewers stay pending, passed over by claims of each that
  handed out a job behind them, until a third reviewer connects, who then takes them all;
- the checker's `excluded_never_completed` holds over the whole run.

The claim statements under concurrency, single and coalesced, are the pg suite's part
(exclusion_tests.cpp)."""

from __future__ import annotations

import time
import unittest

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import ORG, Cluster, close_checked, unique

cluster: Cluster
endpoints: list


def setUpModule() -> None:
    global cluster, endpoints
    cluster = Cluster("exclusions")
    endpoints = [cluster.coordinator().endpoint, cluster.coordinator().endpoint]


def tearDownModule() -> None:
    close_checked(cluster)


def wait_until(what: str, done, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{cluster.tail_logs()}")
        time.sleep(0.05)


class Exclusions(unittest.TestCase):
    def start_worker(self, name: str, queue: str, endpoint: str):
        w = cluster.worker(name, [endpoint], [queue], concurrency=2)
        w.start(lambda job: f"review:{job.job_id}")
        self.addCleanup(w.stop)
        self.assertTrue(w.wait_ready(10), "no session with a coordinator")
        return w

    def test_reviews_go_to_the_other_reviewer_and_excluded_jobs_wait_for_an_allowed_one(self):
        queue = unique("four-eyes")
        alice, bob, carol = unique("alice"), unique("bob"), unique("carol")
        pieces = 15
        # Each piece: the work, and its review, which waits for the work and excludes its completer.
        expected = []
        for _ in range(pieces):
            [(work,), (review,)] = cluster.rows(
                "SELECT id FROM aclaim_enqueue_many(%s::text[], %s::text[], org => %s, "
                "depends_n => '{2}', depends_on => '{-1}', exclude_n => '{2}', "
                "exclude_jobs => '{-1}') ORDER BY n",
                [unique("work"), unique("review")], [queue, queue], ORG)
            expected.append((review, None, work))
        # Every review excludes the completer of its own piece's work (-1: the call's first job).
        self.assertEqual(cluster.rows(
            "SELECT x.job_id, x.excluded_key, x.completer_of FROM job_exclusions x "
            "JOIN jobs r ON r.id = x.job_id WHERE r.queue = %s ORDER BY x.job_id", queue),
            sorted(expected))
        # Jobs neither alice nor bob may take.
        held_back = [cluster.enqueue(queue, unique("audit"), "--exclude-keys", f"{alice},{bob}")
                     for _ in range(5)]
        # Behind the audits in claim order (lower priority), one job each of alice and bob alone
        # may take: a claim that hands one out has passed over every audit on its way.
        passed_over = {name: cluster.enqueue(queue, unique("after-audits"), "--priority", "-1",
                                             "--exclude-keys", other)
                       for name, other in ((alice, bob), (bob, alice))}
        self.start_worker(alice, queue, endpoints[0])
        self.start_worker(bob, queue, endpoints[1])
        wait_until("the work, its reviews and the jobs behind the audits completed",
                   lambda: cluster.scalar(
                       "SELECT count(*) FROM jobs WHERE queue = %s AND state = 'completed'",
                       queue) == 2 * pieces + len(passed_over))
        # Each reviewer's claims went past the audits and left them: still pending, unclaimed.
        for name, job in passed_over.items():
            self.assertEqual(cluster.job(job)["assignee"], name)
        self.assertEqual(cluster.rows(
            "SELECT id, state, assignee FROM jobs WHERE id = ANY(%s) ORDER BY id", held_back),
            [(j, "pending", None) for j in held_back])
        self.assertEqual(cluster.scalar(
            "SELECT count(*) FROM job_events WHERE job_id = ANY(%s) AND kind = 'claimed'",
            held_back), 0)
        # Every review went to the reviewer who did not complete its work.
        reviews = cluster.rows(
            "SELECT r.assignee = w.assignee FROM job_exclusions x JOIN jobs r ON r.id = x.job_id "
            "JOIN jobs w ON w.id = x.completer_of WHERE r.queue = %s AND r.state = 'completed' "
            "AND w.state = 'completed'", queue)
        self.assertEqual(reviews, [(False,)] * pieces,
                         "a review was completed by the work's own reviewer, or went missing")
        by = dict(cluster.rows(
            "SELECT assignee, count(*) FROM jobs WHERE queue = %s AND state = 'completed' "
            "GROUP BY 1", queue))
        self.assertEqual(set(by), {alice, bob})

        self.start_worker(carol, queue, endpoints[0])
        wait_until("the audits completed by the third reviewer", lambda: cluster.scalar(
            "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND state = 'completed' "
            "AND assignee = %s", held_back, carol) == len(held_back))
        self.assertIn("OK: every invariant holds", cluster.check())

if __name__ == "__main__":
    unittest.main()

"""The Worker against real coordinators and a real PostgreSQL, in plaintext or under CURVE
(ACLAIM_PY_MODE): claim and complete, fail and release, renewal past the lease, REVOKED reaching
the handler (operator cancel, reclaimed lease), a stale completion rejected, reconnect after a
coordinator restart, failover between endpoints. Every test serves its own queue, so that they
share one database and one coordinator; the invariant checker runs over all of it at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import unittest

import checkout

from support import (
    ORG, Cluster, Verdicts, close_checked, free_port, plaintext_only, unique, wait_for)
from support import mode as cluster_mode

import aclaim

# Short leases keep the tests short: a lease of 1 s renewed every 300 ms, a reaper every 100 ms.
LEASE_FLAGS = ("--lease-ms", "1000", "--heartbeat-ms", "300", "--reap-interval-ms", "100")

cluster: Cluster
main: str  # the endpoint of the shared coordinator


def setUpModule() -> None:
    global cluster, main
    cluster = Cluster("worker")
    main = cluster.coordinator(*LEASE_FLAGS).endpoint


def tearDownModule() -> None:
    close_checked(cluster)


class WorkerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.queue = unique("q")
        self.verdicts = Verdicts()
        self.workers: list = []
        self.coordinators: list = []

    def tearDown(self) -> None:
        for w in self.workers:
            w.stop()
        # Only the coordinator whose reaper takes a lease back pushes REVOKED to its holder: the
        # tests' own coordinators must not outlive them and reap the shared one's leases.
        for c in self.coordinators:
            c.kill()

    def coordinator(self, *flags: str):  # type: ignore[no-untyped-def]
        c = cluster.coordinator(*flags)
        self.coordinators.append(c)
        return c

    def run(self, result=None):  # type: ignore[no-untyped-def]
        # A failure comes with the coordinators' logs.
        failed = (lambda r: len(r.failures) + len(r.errors)) if result is not None else None
        before = failed(result) if failed else 0
        result = super().run(result)
        if failed and result is not None and failed(result) > before:
            print(cluster.tail_logs(), file=sys.stderr)
        return result

    def start(self, handler, endpoints=None, name=None, **options) -> aclaim.Worker:
        w = cluster.worker(name or unique("py"), endpoints or [main], [self.queue],
                           on_verdict=self.verdicts, **options)
        self.workers.append(w)
        w.start(handler)
        self.assertTrue(w.wait_ready(10), "no session with the coordinator")
        return w

    def enqueue(self, payload: str, *flags: str) -> int:
        return cluster.enqueue(self.queue, payload, *flags)


class ClaimAndOutcomes(WorkerTest):
    def test_claims_and_completes_with_the_handlers_result(self) -> None:
        seen = []
        ids = [self.enqueue(unique("doc")) for _ in range(3)]

        def review(job: aclaim.Job) -> str:
            seen.append(job)
            return f"review:{job.payload}"

        w = self.start(review, concurrency=2)
        self.assertEqual(w.welcome.org_id, ORG)
        for job_id in ids:
            [v] = self.verdicts.wait(job_id)
            self.assertTrue(v.accepted, v)
            self.assertEqual((v.op, v.state, v.replayed), ("complete", "completed", False))
        for job_id in ids:
            row = cluster.job(job_id)
            self.assertEqual(row["state"], "completed")
            self.assertEqual(row["result_ref"], f"review:{row['payload']}")
            self.assertEqual(row["generation"], 1)
            self.assertEqual(cluster.scalar("SELECT result_ref FROM job_results WHERE job_id = %s",
                                            job_id), f"review:{row['payload']}")
        self.assertEqual(sorted(j.job_id for j in seen), sorted(ids))
        self.assertTrue(all(j.attempts == 1 and j.generation == 1 for j in seen))
        self.assertEqual(w.stats.completed, 3)

    @plaintext_only
    def test_fail_for_good_retry_and_release(self) -> None:
        broken, flaky, shy = (self.enqueue(unique(p)) for p in ("broken", "flaky", "shy"))
        calls: dict = {}

        def review(job: aclaim.Job) -> str:
            calls.setdefault(job.job_id, []).append(job)
            if job.job_id == broken:
                raise aclaim.FailJob("scan unreadable", retryable=False)
            if job.job_id == flaky and len(calls[flaky]) == 1:
                raise RuntimeError("model timed out")  # any exception: a retryable failure
            if job.job_id == shy and len(calls[shy]) == 1:
                raise aclaim.ReleaseJob()
            return f"review:{job.job_id}"

        w = self.start(review)
        [v] = self.verdicts.wait(broken)
        self.assertEqual((v.op, v.accepted, v.state), ("fail", True, "failed"))
        self.assertEqual(cluster.job(broken)["last_error"], "scan unreadable")
        first, second = self.verdicts.wait(flaky, 2)
        self.assertEqual((first.op, first.accepted, first.state), ("fail", True, "pending"))
        self.assertEqual((second.op, second.state), ("complete", "completed"))
        self.assertEqual([j.attempts for j in calls[flaky]], [1, 2])
        released, done = self.verdicts.wait(shy, 2)
        self.assertEqual((released.op, released.accepted, released.state),
                         ("release", True, "pending"))
        self.assertEqual(done.state, "completed")
        # RELEASE gives the attempt back; the generation still rises with the claim.
        self.assertEqual([(j.attempts, j.generation) for j in calls[shy]], [(1, 1), (1, 2)])
        self.assertEqual(w.stats.handler_errors, 1)


class Leases(WorkerTest):
    @plaintext_only
    def test_renewals_keep_a_lease_past_its_length(self) -> None:
        job_id = self.enqueue(unique("long"))
        cancelled = []

        def review(job: aclaim.Job) -> str:
            # Holds the job for 2.2 leases: only renewals keep it. A revocation ends the wait.
            cancelled.append(job.cancellation.wait(2.2))
            return "review:long"

        w = self.start(review)
        [v] = self.verdicts.wait(job_id)
        self.assertEqual(cancelled, [False])
        self.assertTrue(v.accepted, v)
        self.assertEqual(cluster.job(job_id)["generation"], 1)  # never reclaimed
        self.assertGreaterEqual(w.stats.renewals, 4)

    def test_operator_cancel_reaches_the_handler(self) -> None:
        job_id = self.enqueue(unique("withdrawn"))
        started = threading.Event()
        seen = []

        def review(job: aclaim.Job) -> str:
            if job.job_id != job_id:
                return "review:next"
            started.set()
            seen.append(job.cancellation.wait(10))
            seen.append((job.cancellation.reason, job.cancellation.detail))
            job.cancellation.raise_if_cancelled()
            return "review:too-late"

        w = self.start(review)
        self.assertTrue(started.wait(10))
        cluster.ctl("cancel", str(job_id), "--reason", "order withdrawn")
        wait_for("the handler to see the cancellation", lambda: len(seen) == 2)
        self.assertTrue(seen[0])
        self.assertEqual(seen[1][0], "cancelled")
        self.assertEqual(cluster.job(job_id)["state"], "cancelled")
        # The handler gave up: nothing was sent for the job, and its slot serves the next one.
        following = self.enqueue(unique("next"))
        [v] = self.verdicts.wait(following)
        self.assertTrue(v.accepted)
        self.assertEqual(self.verdicts.of(job_id), [])
        self.assertEqual(w.stats.revoked, 1)

    def test_a_reclaimed_lease_reaches_the_handler_and_its_late_completion_is_rejected(
            self) -> None:
        job_id = self.enqueue(unique("stalled"))
        attempts = []
        reasons = []
        worker: list = []
        # The first job can reach the handler before start() has returned the worker.
        started = threading.Event()

        def review(job: aclaim.Job) -> str:
            attempts.append((job.attempts, job.generation))
            if len(attempts) == 1:
                self.assertTrue(started.wait(10))
                worker[0].stop_renewing(job)  # a stalled reviewer: no more heartbeats
                reasons.append(job.cancellation.wait(10) and job.cancellation.reason)
            return f"review:{job.generation}"  # the stale one too: fencing must refuse it

        worker.append(self.start(review))
        started.set()
        stale, fresh = self.verdicts.wait(job_id, 2)
        self.assertEqual(reasons, ["reclaimed"])
        self.assertEqual((stale.op, stale.generation, stale.accepted), ("complete", 1, False))
        self.assertEqual(stale.reason, "lease_expired")
        # Claimed again by the same worker: the reclaim used the attempt.
        self.assertEqual(attempts, [(1, 1), (2, 2)])
        self.assertTrue(fresh.accepted and fresh.generation == 2, fresh)
        row = cluster.job(job_id)
        self.assertEqual((row["state"], row["generation"], row["result_ref"]),
                         ("completed", 2, "review:2"))


class Coordinators(WorkerTest):
    def test_reconnects_after_a_coordinator_restart_and_delivers_the_outcome(self) -> None:
        # Leases long enough to outlive the restart: the job must stay this worker's.
        own = self.coordinator("--lease-ms", "4000", "--heartbeat-ms", "500",
                                  "--reap-interval-ms", "100")
        job_id = self.enqueue(unique("restart"))
        started, finish = threading.Event(), threading.Event()

        def review(job: aclaim.Job) -> str:
            if job.job_id == job_id:
                started.set()
                self.assertTrue(finish.wait(15))
            return f"review:{job.job_id}"

        w = self.start(review, endpoints=[own.endpoint], reply_timeout=1.0)
        self.assertTrue(started.wait(10))
        own.kill()
        finish.set()  # the outcome is ready while no coordinator is there
        wait_for("the worker to notice", lambda: w.stats.reconnects >= 1)
        own.start()
        [v] = self.verdicts.wait(job_id, timeout=15)
        self.assertTrue(v.accepted, v)
        self.assertEqual(cluster.job(job_id)["generation"], 1)  # held across the restart
        following = self.enqueue(unique("after"))
        self.assertTrue(self.verdicts.wait(following)[0].accepted)

    def test_fails_over_to_the_next_endpoint(self) -> None:
        first = self.coordinator(*LEASE_FLAGS)
        second = self.coordinator(*LEASE_FLAGS)
        w = self.start(lambda job: f"review:{job.job_id}",
                       endpoints=[first.endpoint, second.endpoint], reply_timeout=1.0)
        self.assertEqual(w.welcome.endpoint, first.endpoint)
        before = self.enqueue(unique("before"))
        self.assertTrue(self.verdicts.wait(before)[0].accepted)
        self.assertEqual(first.terminate(), 0)  # drains, then goes away
        after = self.enqueue(unique("after"))
        self.assertTrue(self.verdicts.wait(after, timeout=15)[0].accepted)
        self.assertEqual(w.welcome.endpoint, second.endpoint)

    def test_skips_an_endpoint_that_does_not_answer(self) -> None:
        second = self.coordinator(*LEASE_FLAGS)
        dead = f"tcp://127.0.0.1:{free_port()}"
        w = self.start(lambda job: f"review:{job.job_id}", endpoints=[dead, second.endpoint],
                       reply_timeout=0.5)
        self.assertEqual(w.welcome.endpoint, second.endpoint)
        job_id = self.enqueue(unique("job"))
        self.assertTrue(self.verdicts.wait(job_id)[0].accepted)
        self.assertGreaterEqual(w.stats.reconnects, 1)


@unittest.skipUnless(cluster_mode() == "curve", "keys exist only under CURVE")
class Refusals(WorkerTest):
    def test_a_name_that_is_not_the_keys_ends_the_worker_with_the_reason(self) -> None:
        keys = cluster.curve_keys(unique("owner"))
        w = aclaim.Worker([main], unique("impostor"), queues=[self.queue], curve=keys,
                          reply_timeout=2.0)
        w.start(lambda job: "never")
        with self.assertRaises(aclaim.WorkerError) as e:
            w.join(10)
        self.assertEqual(e.exception.code, "unauthenticated")

    def test_a_queue_the_key_may_not_serve_ends_the_worker_with_the_reason(self) -> None:
        name = unique("sparky")
        keys = cluster.curve_keys(name, queues=["electrical"])
        w = aclaim.Worker([main], name, queues=["plumbing"], curve=keys, reply_timeout=2.0)
        w.start(lambda job: "never")
        with self.assertRaises(aclaim.WorkerError) as e:
            w.join(10)
        self.assertEqual(e.exception.code, "queue_not_allowed")


class Example(WorkerTest):
    @plaintext_only  # CURVE keys from files are the other tests' business
    def test_the_example_reviewer_serves_until_sigterm(self) -> None:
        """examples/reviewer.py as the README runs it: a process, stopped by SIGTERM."""
        name = unique("example")
        ok, empty = self.enqueue(unique("panel")), self.enqueue(" ")
        argv = [sys.executable, os.path.join(checkout.PACKAGE_ROOT, "examples", "reviewer.py"),
                "--connect", main, "--id", name, "--org", str(ORG), "--queues", self.queue]
        keys = cluster.curve_keys(name)
        if keys is not None:
            argv += ["--server-key", os.path.join(cluster.work, "coordinator.pub"),
                     "--key", os.path.join(cluster.work, name + ".key")]
        env = dict(os.environ, PYTHONPATH=checkout.PACKAGE_ROOT)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            wait_for("both jobs to be reviewed", lambda: cluster.scalar(
                "SELECT count(*) FROM jobs WHERE id IN (%s, %s) AND state IN "
                "('completed', 'failed')", ok, empty) == 2)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=15)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn(f"job {ok} gen 1: complete completed", out)
        self.assertIn(f"job {empty} gen 1: fail failed", out)
        self.assertIn("stopped: 1 completed, 1 failed, 0 revoked", out)
        self.assertTrue(cluster.job(ok)["result_ref"].startswith(f"review:{ok}:"))


if __name__ == "__main__":
    unittest.main()

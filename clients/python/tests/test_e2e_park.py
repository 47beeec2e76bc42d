"""Protocol 1.6 with real processes: a coordinator, a reviewer process that parks its job
(park_worker.py, speaking the wire protocol) and an outside system finishing it over the
coordinator's HTTP endpoint (POST /v1/callback). The callback is accepted once; its replay and a
forged token are refused; a park whose deadline passed is retried by the reaper and its token,
now stale, refused. Every refusal is audited. The fence itself, concurrent callbacks and the SQL
API are the pg suite's part (store_park_tests.cpp)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import unittest
import urllib.error
import urllib.request
from unittest import mock

import checkout  # noqa: F401  (puts the checkout's aclaim first on the path)

from support import ORG, Cluster, close_checked, free_port, unique, wait_for

import aclaim
from aclaim._link import Link

HERE = os.path.dirname(os.path.abspath(__file__))

cluster: Cluster
main: str
http: str


def setUpModule() -> None:
    global cluster, main, http
    cluster = Cluster("park")
    http = f"127.0.0.1:{free_port()}"
    main = cluster.coordinator("--lease-ms", "1000", "--heartbeat-ms", "300",
                               "--reap-interval-ms", "100", "--http-bind", http).endpoint
    wait_for("the coordinator's HTTP endpoint", lambda: _ready())


def tearDownModule() -> None:
    close_checked(cluster)


def _ready() -> bool:
    try:
        with urllib.request.urlopen(f"http://{http}/healthz", timeout=2):
            return True
    except OSError:
        return False


def park(queue: str, timeout_ms: int, note: str) -> dict:
    """Runs a reviewer process that claims one job of `queue` and parks it; PARKED's body."""
    worker_id = unique("parker")
    argv = [sys.executable, os.path.join(HERE, "park_worker.py"), main, worker_id, str(ORG),
            queue, str(timeout_ms), note]
    keys = cluster.curve_keys(worker_id, [queue])
    if keys is not None:
        argv += [keys.server_public, keys.client_public, keys.client_secret]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"park_worker failed: {done.stderr}{done.stdout}")
    return json.loads(done.stdout)


def callback(token: str, outcome: str, result: str) -> tuple:
    """The outside system's POST /v1/callback: (HTTP status, JSON body)."""
    request = urllib.request.Request(
        f"http://{http}/v1/callback", method="POST",
        data=json.dumps({"outcome": outcome, "result": result}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def record_sent(test: unittest.TestCase, worker_id: str) -> "list[tuple[str, object]]":
    """What the worker `worker_id` hands its socket from now until the test ends, as (message,
    job_id) pairs in order: the messages that went on the wire, not what its loop meant to do."""
    sent: "list[tuple[str, object]]" = []
    original = Link._send

    def send(link: Link, kind: str, fields: dict) -> bool:
        ok = original(link, kind, fields)
        if ok and link._o.worker_id == worker_id:
            sent.append((kind, fields.get("job_id")))
        return ok

    patcher = mock.patch.object(Link, "_send", send)
    patcher.start()
    test.addCleanup(patcher.stop)
    return sent


class Park(unittest.TestCase):
    def test_the_callback_is_accepted_once_and_its_replay_refused(self) -> None:
        queue = unique("q")
        job_id = cluster.enqueue(queue, unique("doc"))
        parked = park(queue, 600_000, "sent to the lab")
        self.assertEqual(parked["job_id"], job_id)
        self.assertEqual(len(parked["token"]), 64)
        # Operators see it: the per-queue gauge, the status counts and inspect.
        with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        self.assertIn(f'aclaim_queue_parked{{org="{ORG}",queue="{queue}"}} 1', metrics)
        status = json.loads(cluster.ctl("status", "--json"))
        self.assertGreaterEqual(status["organizations"][str(ORG)]["parked"], 1)
        inspect = json.loads(cluster.ctl("inspect", str(job_id), "--json"))
        self.assertEqual((inspect["job"]["state"], inspect["park"]["note"]),
                         ("parked", "sent to the lab"))
        # The worker is gone (BYE): the park holds no lease, and nothing reclaims it.
        self.assertEqual(cluster.job(job_id)["state"], "parked")

        status, body = callback("f" * 64, "completed", "lab:forged")
        self.assertEqual((status, body["reason"]), (401, "unknown_token"), body)
        status, body = callback(parked["token"], "completed", "lab:report-7")
        self.assertEqual((status, body["accepted"], body["state"], body["job_id"]),
                         (200, True, "completed", job_id), body)
        status, body = callback(parked["token"], "completed", "lab:report-7")
        self.assertEqual((status, body["accepted"], body["reason"]), (409, False, "replayed"),
                         body)
        status, body = callback(parked["token"], "failed", "lab:changed its mind")
        self.assertEqual((status, body["reason"]), (409, "replayed"), body)

        job = cluster.job(job_id)
        self.assertEqual((job["state"], job["result_ref"]), ("completed", "lab:report-7"))
        self.assertEqual(cluster.scalar(
            "SELECT count(*) FROM job_events WHERE job_id = %s AND kind = 'completed' "
            "AND worker = 'callback'", job_id), 1)
        self.assertEqual(cluster.scalar(
            "SELECT count(*) FROM job_events WHERE job_id = %s AND kind = 'rejected' "
            "AND detail LIKE %s", job_id, "%(replayed)%"), 2)
        self.assertGreaterEqual(cluster.scalar(
            "SELECT coalesce(sum(refusals), 0) FROM park_refusal_counts "
            "WHERE reason = 'unknown_token'"), 1)
        inspect = cluster.ctl("inspect", str(job_id), "--json")
        self.assertEqual(json.loads(inspect)["park"]["outcome"], "completed")
        self.assertEqual(json.loads(inspect)["park"]["note"], "sent to the lab")

    def test_a_stale_token_after_the_deadline_retry_is_refused(self) -> None:
        queue = unique("q")
        job_id = cluster.enqueue(queue, unique("doc"))
        parked = park(queue, 500, "short")
        # The reaper ends the park at its deadline; the job is claimable again.
        wait_for("the park ended by the reaper",
                 lambda: cluster.job(job_id)["state"] == "pending")
        self.assertIn("park deadline passed", cluster.job(job_id)["last_error"])
        status, body = callback(parked["token"], "completed", "lab:too-late")
        self.assertEqual((status, body["accepted"], body["reason"]), (409, False, "stale"), body)
        self.assertEqual(cluster.job(job_id)["state"], "pending")
        # The next holder parks it again; the new token works, the old one is still stale.
        again = park(queue, 600_000, "second try")
        self.assertEqual(again["job_id"], job_id)
        self.assertGreater(again["generation"], parked["generation"])
        status, body = callback(parked["token"], "completed", "lab:old")
        self.assertEqual((status, body["reason"]), (409, "stale"), body)
        status, body = callback(again["token"], "completed", "lab:new")
        self.assertEqual((status, body["accepted"]), (200, True), body)
        self.assertEqual(cluster.job(job_id)["result_ref"], "lab:new")

    def test_the_python_worker_parks_and_the_outside_system_finishes(self) -> None:
        queue = unique("q")
        job_id = cluster.enqueue(queue, unique("doc"))
        tickets: "list[aclaim.ParkTicket]" = []
        handed = threading.Event()

        def review(job: aclaim.Job) -> str:
            tickets.append(job.park(600.0, "sent to the lab"))
            handed.set()
            return "ignored: the outside system finishes it"

        worker_id = unique("py-park")
        sent = record_sent(self, worker_id)
        worker = cluster.worker(worker_id, [main], [queue], park=True)
        worker.start(review)
        self.addCleanup(worker.stop)
        self.assertTrue(worker.wait_ready(10), "no session with the coordinator")
        self.assertIn("park", worker.welcome.features)
        self.assertTrue(handed.wait(10), "the handler did not park the job")
        [ticket] = tickets
        self.assertEqual(ticket.job_id, job_id)
        wait_for("the job parked", lambda: cluster.job(job_id)["state"] == "parked")
        worker.stop()
        # Nothing was sent for the handler's return value: of what went on the wire naming the
        # job, one PARK and no outcome; the coordinator heard nothing either (a COMPLETE it
        # refused would be audited as rejected, and leave the job parked all the same).
        outcomes = [kind for kind, job in sent if job == job_id
                    and kind in ("COMPLETE", "FAIL", "RELEASE", "PARK")]
        self.assertEqual(outcomes, ["PARK"], sent)
        self.assertEqual(cluster.rows(
            "SELECT kind FROM job_events WHERE job_id = %s AND worker = %s ORDER BY id",
            job_id, worker_id), [("claimed",), ("parked",)])
        self.assertEqual((worker.stats.completed, dict(worker.stats.rejected)), (0, {}))
        self.assertEqual(cluster.job(job_id)["state"], "parked")
        status, body = callback(ticket.token, "retry", "lab busy")
        self.assertEqual((status, body["state"]), (200, "pending"), body)
        status, body = callback(ticket.token, "completed", "lab:report")
        self.assertEqual((status, body["reason"]), (409, "replayed"), body)

    def test_bad_requests_are_refused_with_json_errors(self) -> None:
        request = urllib.request.Request(f"http://{http}/v1/callback", method="POST",
                                         data=b'{"outcome": "completed"}')
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=10)
        self.assertEqual(e.exception.code, 401)
        self.assertEqual(json.loads(e.exception.read())["reason"], "unauthenticated")
        status, body = callback("a" * 64, "done", "x")
        self.assertEqual(status, 400, body)
        big = urllib.request.Request(f"http://{http}/v1/callback", method="POST",
                                     data=b"x" * 20000,
                                     headers={"Authorization": "Bearer " + "a" * 64})
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(big, timeout=10)
        self.assertEqual(e.exception.code, 413)


if __name__ == "__main__":
    unittest.main()

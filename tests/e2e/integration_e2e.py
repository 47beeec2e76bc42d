#!/usr/bin/env python3
"""The integration path end to end, through public APIs only (docs/integration.md):

* a Python "inspection service" connects as a producer login bound to organization 1 and
  enqueues in its own transactions, next to its own rows: one transaction rolls back (its job
  never exists, its order is never reviewed), one enqueues a dedupe key already held (it gets the
  holder back), one cancels a job it scheduled;
* reviewers serve different queues through a real coordinator: a C++ one (aclaim-worker) the
  electrical queue, failing some reviews so that jobs run out of attempts and are discarded, and
  the Python example reviewer (clients/python/examples/reviewer.py, aclaim.Worker) the plumbing
  queue, failing for good the one order whose document is empty;
* a consumer group follows the verdicts with `aclaimctl results follow --json`, which is killed
  with SIGKILL mid-stream and started again: every verdict reaches the group, and those it
  acknowledged before the crash never come again;
* the group's lag on /metrics is 0 at the end, and `aclaimctl check` passes.

Needs ACLAIM_TEST_DSN (compose/dev test sets it) and the built binaries (--bin-dir).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

import psycopg2  # noqa: E402

from aclaim.consumer import ResultConsumer  # noqa: E402
from aclaim.producer import Producer  # noqa: E402
from sqlapi_support import admin, with_database, with_user  # noqa: E402

ORDERS = 24
DEADLINE_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    def __init__(self, bin_dir: str) -> None:
        self.bin = bin_dir
        self.server = os.environ["ACLAIM_TEST_DSN"]
        self.name = f"aclaim_integration_{os.getpid()}"
        self.login = f"{self.name}_svc"
        self.logs = tempfile.mkdtemp(prefix="aclaim-integration-")
        self.procs: list[subprocess.Popen] = []
        admin(self.server, f"DROP DATABASE IF EXISTS {self.name}", f"CREATE DATABASE {self.name}")
        self.dsn = with_database(self.server, self.name)
        self.service_dsn = with_user(self.dsn, self.login)

    def ctl(self, *args: str, dsn: str | None = None) -> str:
        return subprocess.run([os.path.join(self.bin, "aclaimctl"), "--dsn", dsn or self.dsn,
                               *args], check=True, capture_output=True, text=True,
                              timeout=60).stdout

    def start(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(os.path.join(self.logs, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)

    def drop(self) -> None:
        admin(self.server, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)",
              f"DROP ROLE IF EXISTS {self.login}")
        if os.environ.get("ACLAIM_KEEP_LOGS") == "1":
            print(f"logs kept in {self.logs}", file=sys.stderr)
        else:
            shutil.rmtree(self.logs, ignore_errors=True)

    def tail(self) -> str:
        out = []
        for f in sorted(os.listdir(self.logs)):
            with open(os.path.join(self.logs, f), errors="replace") as h:
                out.append(f"--- {f}\n" + "".join(h.readlines()[-15:]))
        return "\n".join(out)


class Follower:
    """`aclaimctl results follow --json` as a child process, its lines read with a deadline."""

    def __init__(self, run: Run, extra: list[str]) -> None:
        self.proc = subprocess.Popen([os.path.join(run.bin, "aclaimctl"), "--dsn",
                                      run.service_dsn, "results", "follow", "--group", "billing",
                                      "--json", "--batch", "3", "--wait", "2s", *extra],
                                     stdout=subprocess.PIPE)
        run.procs.append(self.proc)
        self.buffer = b""

    def line(self, deadline: float) -> dict | None:
        """The next verdict, or None at the deadline or when the follower has exited."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def inspection_service(run: Run) -> dict:
    """Enqueues the orders the way a service would: each in its own transaction, beside its own
    row. Returns what a correct run must show."""
    # A finished order keeps its key for an hour: enqueueing it again returns the same job
    # whether its review is still running or already done.
    producer = Producer(dedupe_window=3600)
    conn = psycopg2.connect(run.service_dsn, connect_timeout=10)
    expected: dict = {"jobs": {}, "rolled_back_order": 2}
    try:
        for order in range(1, ORDERS + 1):
            queue = "electrical" if order % 2 else "plumbing"
            with conn.cursor() as cur:
                cur.execute("INSERT INTO inspections (order_no) VALUES (%s) RETURNING id", (order,))
                # Order 4's document is empty: the Python reviewer fails it for good.
                document = " " if order == 4 else json.dumps({"order": order})
                job = producer.enqueue(cur, document, queue=queue,
                                       dedupe_key=f"order-{order}", max_attempts=2)
                cur.execute("UPDATE inspections SET job_id = %s WHERE order_no = %s",
                            (job.id, order))
            if order == expected["rolled_back_order"]:
                conn.rollback()  # the service changed its mind: no row, no job, no review
                continue
            conn.commit()
            expected["jobs"][job.id] = f"order-{order}"
        # A duplicate: the order is already being inspected; the holder comes back.
        with conn.cursor() as cur:
            dup = producer.enqueue(cur, "order 1 again", queue="electrical", dedupe_key="order-1")
        conn.commit()
        assert not dup.created and expected["jobs"][dup.id] == "order-1", dup
        # Scheduled for tomorrow, then withdrawn: a cancelled verdict.
        with conn.cursor() as cur:
            later = producer.enqueue(cur, "re-inspection", queue="electrical",
                                     dedupe_key="reinspect-1", delay=86400)
        conn.commit()
        with conn.cursor() as cur:
            assert [c.id for c in producer.cancel(cur, [later.id], "order withdrawn")] == [later.id]
        conn.commit()
        expected["jobs"][later.id] = "reinspect-1"
    finally:
        conn.close()
    return expected


def bin_dir_argument(description: str) -> str | None:
    """The --bin-dir a suite's test is given; None (said on stderr) without the suite's
    PostgreSQL."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--bin-dir", required=True)
    args = p.parse_args()
    if not os.environ.get("ACLAIM_TEST_DSN"):
        print("ACLAIM_TEST_DSN is not set: run through compose/dev test", file=sys.stderr)
        return None
    return args.bin_dir


def main() -> int:
    bin_dir = bin_dir_argument(__doc__)
    if bin_dir is None:
        return 1
    run = Run(bin_dir)
    try:
        run.ctl("migrate")
        admin(run.dsn, f"DROP ROLE IF EXISTS {run.login}", f"CREATE ROLE {run.login} LOGIN",
              "CREATE TABLE inspections (id serial PRIMARY KEY, order_no int UNIQUE, job_id bigint)",
              f"GRANT SELECT, INSERT, UPDATE ON inspections TO {run.login}",
              f"GRANT USAGE ON SEQUENCE inspections_id_seq TO {run.login}")
        run.ctl("producers", "bind", "--login", run.login, "--org", "1")
        run.ctl("results", "group", "add", "billing", dsn=run.service_dsn)

        endpoint = f"tcp://127.0.0.1:{free_port()}"
        http = f"127.0.0.1:{free_port()}"
        run.start("coordinator", [os.path.join(run.bin, "aclaim-coordinator"), "--dsn", run.dsn,
                                  "--bind", endpoint, "--plaintext", "--lease-ms", "2000",
                                  "--reap-interval-ms", "100", "--http-bind", http])
        run.start("rev-electrical", [os.path.join(run.bin, "aclaim-worker"), "--connect",
                                     endpoint, "--org", "1", "--id", "rev-electrical", "--queues",
                                     "electrical", "--review-ms", "30", "--fail-rate", "0.3"])
        run.start("py-plumbing", [sys.executable, "-u",
                                  os.path.join(ROOT, "clients", "python", "examples", "reviewer.py"),
                                  "--connect", endpoint, "--org", "1", "--id", "py-plumbing",
                                  "--queues", "plumbing"],
                  env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "clients", "python")))

        first = Follower(run, [])
        expected = inspection_service(run)
        jobs = expected["jobs"]
        deadline = time.monotonic() + DEADLINE_S

        # The first follower dies mid-stream, with SIGKILL: no chance to finish anything.
        before = []
        while len(before) < 5:
            v = first.line(deadline)
            if v is None:
                raise RuntimeError("the first follower printed no verdicts\n" + run.tail())
            before.append(v)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
        # Whatever it wrote before dying is still in the pipe: a verdict is acknowledged only
        # after it was written, so these are all it can have acknowledged.
        while (v := first.line(time.monotonic() + 5)) is not None:
            before.append(v)
        cursor = json.loads(run.ctl("results", "group", "list", "--json",
                                    dsn=run.service_dsn))[0]["acked"]
        acked_before = [v for v in before if v["seq"] <= cursor]

        # The next follower starts where the group's cursor is, and drains everything.
        seen_after: list = []
        second = Follower(run, [])
        while {v["job_id"] for v in acked_before + seen_after} < set(jobs):
            v = second.line(deadline)
            if v is None:
                break
            seen_after.append(v)
        # A moment more: anything delivered twice would show up now.
        while (v := second.line(time.monotonic() + 1.0)) is not None:
            seen_after.append(v)
        second.proc.send_signal(signal.SIGTERM)
        second.proc.wait(timeout=30)

        problems = []
        ids_after = [v["job_id"] for v in seen_after]
        if any(v["seq"] <= cursor for v in seen_after):
            problems.append(f"acknowledged verdicts came again: cursor {cursor}, after {ids_after}")
        once = [v["job_id"] for v in acked_before] + ids_after
        if sorted(once) != sorted(set(once)) or set(once) != set(jobs):
            problems.append(f"verdicts not exactly once: {sorted(once)} vs jobs {sorted(jobs)}")
        seqs = [v["seq"] for v in acked_before + seen_after]
        if seqs != list(range(1, len(seqs) + 1)):
            problems.append(f"positions not dense and in order: {seqs}")
        outcomes = {v["job_id"]: v for v in acked_before + seen_after}
        for job_id, key in jobs.items():
            v = outcomes.get(job_id)
            if v and v["dedupe_key"] != key:
                problems.append(f"job {job_id}: dedupe key {v['dedupe_key']} instead of {key}")
            if v and v["outcome"] == "completed" and not v["result_ref"]:
                problems.append(f"job {job_id} completed without a result")
        kinds = sorted({v["outcome"] for v in outcomes.values()})
        if not {"completed", "cancelled", "failed"} <= set(kinds):
            problems.append(f"outcomes seen: {kinds}")

        # Nothing more for the group; the rolled-back order never existed.
        with ResultConsumer(run.service_dsn, "billing", create=False) as check:
            if check.fetch():
                problems.append("the group still has verdicts after acknowledging everything")
            if check.status().lag != 0:
                problems.append(f"lag {check.status().lag} at the end")
        conn = psycopg2.connect(run.dsn, connect_timeout=10)
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM jobs WHERE payload LIKE %s",
                        (json.dumps({"order": expected["rolled_back_order"]}),))
            if cur.fetchone()[0] != 0:
                problems.append("the rolled-back order has a job")
            cur.execute("SELECT count(*) FROM jobs")
            if cur.fetchone()[0] != len(jobs):
                problems.append("jobs other than the committed ones exist")
            # Each queue was served by its own reviewer, one in C++ and one in Python.
            cur.execute("SELECT queue, array_agg(DISTINCT assignee) FROM jobs "
                        "WHERE state = 'completed' GROUP BY queue ORDER BY queue")
            served = dict(cur.fetchall())
            if served != {"electrical": ["rev-electrical"], "plumbing": ["py-plumbing"]}:
                problems.append(f"reviewers by queue: {served}")
        conn.close()
        metrics = urllib.request.urlopen(f"http://{http}/metrics", timeout=10).read().decode()
        if 'aclaim_result_group_lag{org="1",group="billing"} 0\n' not in metrics:
            problems.append("the group's lag on /metrics is not 0")

        run.stop_all()
        check_out = subprocess.run([os.path.join(run.bin, "aclaimctl"), "--dsn", run.dsn,
                                    "check"], capture_output=True, text=True, timeout=120)
        if check_out.returncode != 0:
            problems.append("aclaimctl check failed:\n" + check_out.stdout + check_out.stderr)

        summary = {"jobs": len(jobs), "outcomes": kinds, "before_crash": len(before),
                   "acked_before_crash": len(acked_before), "redelivered":
                   len([v for v in before if v["seq"] > cursor]), "after": len(seen_after)}
        print(json.dumps(summary))
        if problems:
            print("\n".join(problems), file=sys.stderr)
            print(run.tail(), file=sys.stderr)
            return 1
        return 0
    finally:
        run.stop_all()
        run.drop()


if __name__ == "__main__":
    sys.exit(main())

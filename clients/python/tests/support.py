"""What the Python client's end-to-end tests run against: a fresh database on the suite's
PostgreSQL (ACLAIM_TEST_DSN), real coordinators as processes (plaintext, or under CURVE when
ACLAIM_PY_MODE=curve), aclaimctl for the operator's side and psycopg2 to read the rows.

Nothing here sleeps in the hope that something happened: wait_for() polls a condition until a
deadline and fails with what it last saw.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

import psycopg2

import checkout

checkout.use()

import aclaim  # noqa: E402

ORG = 1


def mode() -> str:
    return os.environ.get("ACLAIM_PY_MODE", "plaintext")


plaintext_only = unittest.skipIf(mode() == "curve",
                                 "does not depend on the transport: runs in the plaintext pass")
"""Marks a test that the CURVE pass need not repeat."""


def bin_dir() -> str:
    path = os.environ.get("ACLAIM_BIN_DIR", "")
    if not path:
        raise RuntimeError("ACLAIM_BIN_DIR is not set: run through ctest (tests/run.py)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, condition: Callable[[], Any], timeout: float = 10.0,
             interval: float = 0.02) -> Any:
    """Polls `condition` until it returns something true, or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} "
                                 f"(last: {value!r})")
        time.sleep(interval)


def unique(prefix: str) -> str:
    """A name (of a worker, queue or document) no other test of the run uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def close_checked(cluster: "Cluster") -> None:
    """A test module's tearDownModule: closes its cluster once `aclaimctl check` has found no
    violation in the history the module's tests left."""
    try:
        report = cluster.check()
        assert "violation" not in report.lower(), report
    finally:
        cluster.close()


def _with_database(dsn: str, name: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


class Coordinator:
    """One aclaim-coordinator process on a fixed endpoint, restartable."""

    def __init__(self, cluster: "Cluster", flags: Sequence[str]) -> None:
        self.cluster = cluster
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.flags = list(flags)
        self.process: Optional[subprocess.Popen] = None
        self.runs = 0

    def start(self) -> "Coordinator":
        self.runs += 1
        c = self.cluster
        # No HTTP endpoint unless the test names one (the callback of a parked job).
        http = [] if "--http-bind" in self.flags else ["--http-bind", ""]
        argv = [os.path.join(bin_dir(), "aclaim-coordinator"), "--dsn", c.dsn, "--bind",
                self.endpoint, *http, "--key-cache-ms", "200", "--log-level", "info",
                *self.flags]
        argv += ["--curve-secret-key-file", c.server_key_file] if c.curve else ["--plaintext"]
        port = self.endpoint.rsplit(":", 1)[1]
        log = open(os.path.join(c.work, f"coordinator-{port}-{self.runs}.log"), "wb")
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def terminate(self) -> int:
        """SIGTERM: the coordinator drains and exits; returns its exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)


class Cluster:
    """A fresh database with the schema, coordinators on it, and the tools to look inside."""

    def __init__(self, tag: str) -> None:
        server = os.environ.get("ACLAIM_TEST_DSN")
        if not server:
            raise RuntimeError("ACLAIM_TEST_DSN is not set: run through compose/dev test")
        self.curve = mode() == "curve"
        self.server_dsn = server
        self.name = f"aclaim_py_{tag}_{mode()}_{os.getpid()}"
        self.work = tempfile.mkdtemp(prefix=f"aclaim-py-{tag}-")
        self._admin(f"DROP DATABASE IF EXISTS {self.name}")
        self._admin(f"CREATE DATABASE {self.name}")
        self.dsn = _with_database(server, self.name)
        self.ctl("migrate")
        self._conn = psycopg2.connect(self.dsn)
        self._conn.autocommit = True
        self.coordinators: List[Coordinator] = []
        self.server_key_file = ""
        self.server_public = ""
        if self.curve:
            self.server_public = self.ctl("keys", "generate", "--server", "--out-dir",
                                          self.work).strip()
            self.server_key_file = os.path.join(self.work, "coordinator.key")
        self._keys: Dict[str, aclaim.CurveKeys] = {}

    # ---- processes ----

    def coordinator(self, *flags: str) -> Coordinator:
        c = Coordinator(self, flags).start()
        self.coordinators.append(c)
        return c

    def ctl(self, *args: str, check: bool = True) -> str:
        r = subprocess.run([os.path.join(bin_dir(), "aclaimctl"), "--dsn", self.dsn, *args],
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"aclaimctl {' '.join(args)} failed ({r.returncode}): "
                                 f"{r.stderr}{r.stdout}")
        return r.stdout

    def _admin(self, statement: str) -> None:
        conn = psycopg2.connect(self.server_dsn, options="-c client_min_messages=warning")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(statement)
        finally:
            conn.close()

    def rows(self, statement: str, *params: Any) -> List[tuple]:
        """The rows of one query on the test's database."""
        with self._conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchall()

    def scalar(self, statement: str, *params: Any) -> Any:
        rows = self.rows(statement, *params)
        return rows[0][0] if rows else None

    # ---- jobs ----

    def enqueue(self, queue: str, payload: str, *flags: str) -> int:
        """Enqueues one job and returns its id (payloads are unique within a test)."""
        self.ctl("enqueue", "--org", str(ORG), "--queue", queue, "--new-queue", *flags, payload)
        return int(self.scalar("SELECT id FROM jobs WHERE payload = %s", payload))

    def job(self, job_id: int) -> Dict[str, Any]:
        cols = ["state", "generation", "attempts", "result_ref", "assignee", "last_error",
                "payload"]
        [values] = self.rows(f"SELECT {', '.join(cols)} FROM jobs WHERE id = %s", job_id)
        return dict(zip(cols, values))

    # ---- workers ----

    def curve_keys(self, worker_id: str, queues: Sequence[str] = ()) -> Optional[aclaim.CurveKeys]:
        """Under CURVE: a key pair registered for this worker name (once), else None."""
        if not self.curve:
            return None
        if worker_id not in self._keys:
            public = self.ctl("keys", "generate", "--out-dir", self.work, "--name",
                              worker_id).strip()
            register = ["keys", "register", "--org", str(ORG), "--name", worker_id,
                        "--public-key=" + public]
            if queues:
                register.append("--queues=" + ",".join(queues))
            self.ctl(*register)
            self._keys[worker_id] = aclaim.CurveKeys.from_files(
                os.path.join(self.work, "coordinator.pub"),
                os.path.join(self.work, worker_id + ".key"))
        return self._keys[worker_id]

    def worker(self, worker_id: str, endpoints: Sequence[str], queues: Sequence[str],
               **options: Any) -> aclaim.Worker:
        options.setdefault("reply_timeout", 2.0)
        options.setdefault("claim_wait", 0.5)
        options.setdefault("stop_timeout", 2.0)
        return aclaim.Worker(list(endpoints), worker_id, org_id=ORG, queues=queues,
                             curve=self.curve_keys(worker_id), **options)

    # ---- the end ----

    def check(self) -> str:
        """The invariant checker over everything the tests did."""
        return self.ctl("check")

    def close(self) -> None:
        for c in self.coordinators:
            c.kill()
        self._conn.close()
        self._admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        # A failing test printed the logs' tails already; ACLAIM_KEEP_LOGS=1 keeps them whole.
        if os.environ.get("ACLAIM_KEEP_LOGS") == "1":
            print(f"logs kept in {self.work}", file=sys.stderr)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def tail_logs(self, lines: int = 30) -> str:
        out = []
        for name in sorted(os.listdir(self.work)):
            if name.endswith(".log"):
                with open(os.path.join(self.work, name), errors="replace") as f:
                    out.append(f"---- {name} ----\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)


class Verdicts:
    """Collects a worker's verdicts (on_verdict runs on its I/O thread) for waiting on them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: List[aclaim.Verdict] = []

    def __call__(self, v: aclaim.Verdict) -> None:
        with self._lock:
            self.items.append(v)

    def of(self, job_id: int) -> List[aclaim.Verdict]:
        with self._lock:
            return [v for v in self.items if v.job_id == job_id]

    def wait(self, job_id: int, count: int = 1, timeout: float = 10.0) -> List[aclaim.Verdict]:
        return wait_for(f"{count} verdict(s) on job {job_id}",
                        lambda: len(self.of(job_id)) >= count and self.of(job_id), timeout)

#!/usr/bin/env python3
"""What works through PgBouncer (docs/operations.md, "Through PgBouncer"), with Debian's
pgbouncer in front of the suite's PostgreSQL: one PgBouncer on 127.0.0.1, configured as the
documentation says, with the test's database twice, pooled by transaction and by session.

Through transaction pooling:
* a producer login enqueues with the SQL API (aclaim_enqueue and aclaim_enqueue_many, over
  aclaim_enqueue_jobs, through aclaim.Producer) in
  its own transactions, one of them rolled back;
* a result consumer (aclaim.ResultConsumer) creates its group, reads every verdict and
  acknowledges it; its waits end at their bound, as no notification reaches it there;
* aclaimctl status; not aclaimctl enqueue, which prepares its statements on the connection: its
  second run finds them already prepared on the pooled server connection and fails;
* the role's own statement_timeout bounds the statements, as the one a client asks for at connect
  (the `options` startup parameter) never reaches the server.

Through session pooling:
* the coordinator serves claims and completions end to end to a reviewer, and a job enqueued
  while the reviewer's claim waits reaches it within a second or two: LISTEN works, since the
  coordinator keeps its server connections for as long as it holds its client connections;
* aclaimctl status and enqueue.

Needs ACLAIM_TEST_DSN (compose/dev test sets it), pgbouncer (compose/dev deps installs it) and the
built binaries (--bin-dir). Ends by itself: every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

import psycopg2  # noqa: E402

from aclaim.consumer import ResultConsumer  # noqa: E402
from aclaim.producer import NewJob, Producer  # noqa: E402
from integration_e2e import Run, bin_dir_argument, free_port  # noqa: E402
from sqlapi_support import admin  # noqa: E402

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
DEADLINE_S = 90
# The role's own bound on every statement, which is what bounds them through PgBouncer.
ROLE_STATEMENT_TIMEOUT = "7s"


def wait_until(what: str, done, deadline: float) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class BouncedRun(Run):
    """The integration test's run (its database, producer login and processes), with PgBouncer
    in front of its database."""

    def __init__(self, bin_dir: str) -> None:
        super().__init__(bin_dir)
        self.port = free_port()
        self.bouncer: subprocess.Popen | None = None

    def pooled(self, mode: str, user: str = "postgres") -> str:
        """The DSN of the test's database through PgBouncer's pool of this mode."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{mode}"

    def start_pgbouncer(self) -> None:
        """PgBouncer as docs/operations.md configures it. It refuses to run as root: as root it is
        started as the postgres user (-u), with files that user can read."""
        server = urllib.parse.urlsplit(self.server)
        target = f"host={server.hostname} port={server.port} dbname={self.name}"
        users = os.path.join(self.logs, "userlist.txt")
        with open(users, "w") as f:
            f.write(f'"postgres" ""\n"{self.login}" ""\n')
        ini = os.path.join(self.logs, "pgbouncer.ini")
        with open(ini, "w") as f:
            f.write(f"""[databases]
transaction = {target} pool_mode=transaction
session = {target} pool_mode=session

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
logfile = {os.path.join(self.logs, "pgbouncer.log")}
max_client_conn = 200
default_pool_size = 40
ignore_startup_parameters = extra_float_digits, options
""")
        argv = [PGBOUNCER, ini]
        if os.geteuid() == 0:
            for path in (self.logs, users, ini):
                shutil.chown(path, "postgres")
            argv = [PGBOUNCER, "-u", "postgres", ini]
        self.bouncer = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

        def answers() -> bool:
            try:
                psycopg2.connect(self.pooled("session"), connect_timeout=2).close()
                return True
            except psycopg2.OperationalError:
                if self.bouncer.poll() is not None:
                    raise RuntimeError("pgbouncer exited\n" + self.tail())
                return False

        wait_until("pgbouncer to answer", answers, time.monotonic() + 20)

    def ctl_run(self, dsn: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([os.path.join(self.bin, "aclaimctl"), "--dsn", dsn, *args],
                              capture_output=True, text=True, timeout=60)

    def stop_all(self) -> None:
        super().stop_all()
        if self.bouncer is not None and self.bouncer.poll() is None:
            self.bouncer.send_signal(signal.SIGTERM)
            self.bouncer.wait(timeout=15)

    def scalar(self, sql: str):
        conn = psycopg2.connect(self.dsn, connect_timeout=10)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchone()[0]
        finally:
            conn.close()


def producer_through_transaction_pooling(run: Run, problems: list[str]) -> list[int]:
    """The producer login's enqueues, each in its own transaction; one rolled back."""
    dsn = run.pooled("transaction", run.login)
    producer = Producer()
    conn = psycopg2.connect(dsn, connect_timeout=10)
    ids: list[int] = []
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            bound = cur.fetchone()[0]
        conn.rollback()
        if bound != ROLE_STATEMENT_TIMEOUT:
            problems.append(f"statement_timeout through PgBouncer is {bound}, not the role's")
        for i in range(6):
            with conn.cursor() as cur:
                ids.append(producer.enqueue(cur, json.dumps({"order": i}), dedupe_key=f"o-{i}").id)
            conn.commit()
        with conn.cursor() as cur:
            producer.enqueue(cur, "changed its mind", dedupe_key="o-rolled-back")
        conn.rollback()
        with conn.cursor() as cur:
            ids += [e.id for e in producer.enqueue_many(
                cur, [NewJob(payload=f"batch {k}") for k in range(4)])]
        conn.commit()
    finally:
        conn.close()
    return ids


def main() -> int:
    bin_dir = bin_dir_argument(__doc__)
    if bin_dir is None:
        return 1
    if not os.path.exists(PGBOUNCER):
        print("pgbouncer is not installed (compose/dev deps installs it)", file=sys.stderr)
        return 1
    run = BouncedRun(bin_dir)
    problems: list[str] = []
    try:
        run.ctl("migrate")
        admin(run.dsn, f"DROP ROLE IF EXISTS {run.login}", f"CREATE ROLE {run.login} LOGIN",
              f"ALTER ROLE {run.login} SET statement_timeout = '{ROLE_STATEMENT_TIMEOUT}'")
        run.ctl("producers", "bind", "--login", run.login, "--org", "1")
        run.start_pgbouncer()
        deadline = time.monotonic() + DEADLINE_S
        txn, session = run.pooled("transaction"), run.pooled("session")

        # aclaimctl through both pools. Through transaction pooling, status only: enqueue's
        # prepared statements stay on the pooled server connection after its first run, and the
        # next run's prepare fails there (docs/operations.md).
        for dsn in (txn, session):
            run.ctl("status", dsn=dsn)
        for _ in range(2):
            run.ctl("enqueue", "--org", "1", "--count", "2", dsn=session)
        run.ctl("enqueue", "--org", "1", "--count", "1", dsn=txn)
        second = run.ctl_run(txn, "enqueue", "--org", "1", "--count", "1")
        if second.returncode == 0 or "prepared statement" not in second.stderr:
            problems.append("aclaimctl enqueue ran twice through transaction pooling: "
                            "docs/operations.md says it does not\n" + second.stderr)

        # The consumer group, created through transaction pooling before the first verdict.
        consumer = ResultConsumer(run.pooled("transaction", run.login), "billing",
                                  start="earliest", statement_timeout=5)
        ids = producer_through_transaction_pooling(run, problems)
        want = len(ids) + 5
        if run.scalar("SELECT count(*) FROM jobs") != want:
            problems.append(f"jobs after the enqueues: {run.scalar('SELECT count(*) FROM jobs')}"
                            f", not {want}")

        # The coordinator through session pooling, a reviewer through it.
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        coordinator = run.start("coordinator", [
            os.path.join(run.bin, "aclaim-coordinator"), "--dsn", session, "--bind", endpoint,
            "--plaintext", "--lease-ms", "3000", "--reap-interval-ms", "200"])
        run.start("reviewer", [os.path.join(run.bin, "aclaim-worker"), "--connect", endpoint,
                               "--org", "1", "--id", "reviewer", "--review-ms", "20",
                               "--claim-wait-ms", "30000"])
        wait_until("every job completed through session pooling",
                   lambda: run.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
                   == want or coordinator.poll() is not None, deadline)
        if coordinator.poll() is not None:
            raise RuntimeError("the coordinator exited\n" + run.tail())

        # The reviewer's claim now waits up to 30 s: a job enqueued through transaction pooling
        # reaches it only through the coordinator's LISTEN, well before that.
        time.sleep(1.0)
        enqueued = time.monotonic()
        conn = psycopg2.connect(run.pooled("transaction", run.login), connect_timeout=10)
        with conn.cursor() as cur:
            Producer().enqueue(cur, "woken")
        conn.commit()
        conn.close()
        want += 1
        wait_until("the woken job completed",
                   lambda: run.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
                   == want, deadline)
        woken_s = time.monotonic() - enqueued
        if woken_s > 5:
            problems.append(f"a job enqueued while the claim waited took {woken_s:.1f} s")

        # Every verdict reaches the consumer through transaction pooling, once.
        seen: list[int] = []
        while len(seen) < want and time.monotonic() < deadline:
            for outcome in consumer.next(1.0):
                seen.append(outcome.job_id)
                consumer.ack(outcome)
        status = consumer.status()
        consumer.close()
        if sorted(seen) != sorted(set(seen)) or len(seen) != want:
            problems.append(f"verdicts read: {len(seen)} ({len(set(seen))} distinct), "
                            f"not {want}")
        if status.lag != 0:
            problems.append(f"the group's lag is {status.lag} at the end")
        if not set(ids) <= set(seen):
            problems.append("a producer's job has no verdict")

        status_text = run.ctl("status", dsn=session)
        run.stop_all()
        check = subprocess.run([os.path.join(run.bin, "aclaimctl"), "--dsn", run.dsn, "check"],
                               capture_output=True, text=True, timeout=120)
        if check.returncode != 0:
            problems.append("aclaimctl check failed:\n" + check.stdout + check.stderr)
        print(json.dumps({"jobs": want, "verdicts": len(seen),
                          "woken_after_s": round(woken_s, 2)}))
        if problems:
            print("\n".join(problems), file=sys.stderr)
            print(status_text, file=sys.stderr)
            print(run.tail(), file=sys.stderr)
            return 1
        return 0
    except Exception:
        print(run.tail(), file=sys.stderr)
        raise
    finally:
        run.stop_all()
        run.drop()


if __name__ == "__main__":
    sys.exit(main())

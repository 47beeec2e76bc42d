#!/usr/bin/env python3
"""The Python Producer and ResultConsumer against a real PostgreSQL: the suite's server
(ACLAIM_TEST_DSN), a fresh database migrated with aclaimctl, and producer logins created for the
run and dropped after it.

    ACLAIM_TEST_DSN=postgresql://postgres@127.0.0.1:5432/postgres \\
        /usr/bin/python3 clients/python/tests/test_producer_consumer.py --bin-dir build/bin
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import psycopg2  # noqa: E402
import psycopg2.errors  # noqa: E402

from aclaim.consumer import ResultConsumer  # noqa: E402
from aclaim.producer import NewJob, Producer, in_call  # noqa: E402
from sqlapi_support import admin, with_database, with_user  # noqa: E402

BIN_DIR = "build/bin"
SERVER = os.environ.get("ACLAIM_TEST_DSN", "")


class Database:
    """A fresh, migrated database with two producer logins, bound to organizations 1 and 2."""

    def __init__(self, tag: str) -> None:
        self.name = f"aclaim_py_{tag}_{os.getpid()}"
        admin(SERVER, f"DROP DATABASE IF EXISTS {self.name}", f"CREATE DATABASE {self.name}")
        self.dsn = with_database(SERVER, self.name)
        subprocess.run([os.path.join(BIN_DIR, "aclaimctl"), "--dsn", self.dsn, "migrate"],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        self.logins = {org: f"{self.name}_p{org}" for org in (1, 2)}
        for org, login in self.logins.items():
            admin(self.dsn, f"DROP ROLE IF EXISTS {login}", f"CREATE ROLE {login} LOGIN")
            subprocess.run([os.path.join(BIN_DIR, "aclaimctl"), "--dsn", self.dsn, "producers",
                            "bind", "--login", login, "--org", str(org)],
                           check=True, stdout=subprocess.DEVNULL, timeout=60)

    def login_dsn(self, org: int) -> str:
        return with_user(self.dsn, self.logins[org])

    def scalar(self, sql: str, *args: object) -> object:
        conn = psycopg2.connect(self.dsn, connect_timeout=10)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone()[0]
        finally:
            conn.close()

    def drop(self) -> None:
        admin(SERVER, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        for login in self.logins.values():
            admin(SERVER, f"DROP ROLE IF EXISTS {login}")


class ProducerTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.db = Database("producer")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.db.drop()

    def test_rolled_back_enqueue_never_existed_and_duplicate_keys_return_the_holder(self) -> None:
        producer = Producer()
        conn = psycopg2.connect(self.db.login_dsn(1), connect_timeout=10)
        try:
            with conn.cursor() as cur:
                gone = producer.enqueue(cur, "never", dedupe_key="rollback-1")
            conn.rollback()
            with conn:  # commits
                first = producer.enqueue(conn, "order 5", queue="electrical", priority=3,
                                         dedupe_key="order-5")
                again = producer.enqueue(conn, "order 5 again", dedupe_key="order-5")
                later = producer.enqueue(conn, "later", delay=timedelta(minutes=5))
            self.assertTrue(first.created)
            self.assertFalse(again.created)
            self.assertEqual(again.id, first.id)
            self.assertEqual(later.state, "scheduled")
            with conn:
                status = producer.status(conn, [gone.id, first.id, later.id], ["rollback-1"])
            self.assertEqual([s.id for s in status], [first.id, later.id])
            self.assertEqual(status[0].queue, "electrical")
            self.assertEqual(status[0].priority, 3)
            self.assertEqual(status[0].dedupe_key, "order-5")
        finally:
            conn.close()
        self.assertEqual(self.db.scalar("SELECT count(*) FROM jobs WHERE id = %s", gone.id), 0)

    def test_many_jobs_and_cancel(self) -> None:
        producer = Producer()
        with psycopg2.connect(self.db.login_dsn(1), connect_timeout=10) as conn:
            done = producer.enqueue_many(conn, [NewJob("a"), NewJob("b", queue="plumbing"),
                                                NewJob("c", max_attempts=5,
                                                       run_timeout=timedelta(minutes=2))])
            self.assertEqual(len(done), 3)
            cancelled = producer.cancel(conn, [done[1].id, 10**9], "order withdrawn")
            self.assertEqual([(c.id, c.was) for c in cancelled], [(done[1].id, "pending")])
        conn.close()

    def test_a_fan_in_waits_and_bad_dependencies_are_refused(self) -> None:
        producer = Producer()
        with psycopg2.connect(self.db.login_dsn(2), connect_timeout=10) as two:
            theirs = producer.enqueue(two, "organization 2's")
        two.close()
        conn = psycopg2.connect(self.db.login_dsn(1), connect_timeout=10)
        try:
            with conn:
                done = producer.enqueue_many(conn, [
                    NewJob("electrical"), NewJob("plumbing"),
                    NewJob("approval", depends_on=[in_call(1), in_call(2)]),
                    NewJob("notify", depends_on=[in_call(3)], on_failure="run")])
                later = producer.enqueue(conn, "invoice", depends_on=[done[2].id])
            self.assertEqual([d.state for d in done], ["pending", "pending", "waiting", "waiting"])
            self.assertEqual(later.state, "waiting")
            with conn:
                edges = producer.dependencies(conn, [done[2].id])
            self.assertEqual([(e.job_id, e.depends_on, e.policy, e.resolved) for e in edges],
                             [(done[2].id, done[0].id, "cancel", None),
                              (done[2].id, done[1].id, "cancel", None),
                              (done[3].id, done[2].id, "run", None),
                              (later.id, done[2].id, "cancel", None)])
            # Cancelling the approval cancels the invoice (policy cancel) and unblocks notify
            # (policy run).
            with conn:
                producer.cancel(conn, [done[2].id], "visit withdrawn")
                status = {s.id: s.state for s in producer.status(conn, [done[3].id, later.id])}
            self.assertEqual(status, {done[3].id: "pending", later.id: "cancelled"})
            with conn:
                resolved = {(e.job_id, e.resolved) for e in producer.dependencies(conn, [done[2].id])
                            if e.depends_on == done[2].id}
            self.assertEqual(resolved, {(done[3].id, "cancelled"), (later.id, "cancelled")})
            # Another organization's producer sees none of this workflow's edges.
            with psycopg2.connect(self.db.login_dsn(2), connect_timeout=10) as two:
                self.assertEqual(producer.dependencies(two, [done[2].id, done[3].id]), [])
            two.close()
            for bad, message in (([in_call(2)], "form a cycle"),
                                 ([theirs.id], "is not a job of organization 1"),
                                 ([10**12], "is not a job of organization 1 (no such job")):
                with self.assertRaises(psycopg2.Error) as raised:
                    producer.enqueue_many(conn, [NewJob("x", depends_on=bad),
                                                 NewJob("y", depends_on=[in_call(1)])])
                self.assertIn(message, str(raised.exception))
                conn.rollback()
        finally:
            conn.close()

    def test_exclusions_are_recorded_and_bad_ones_refused(self) -> None:
        producer = Producer()
        conn = psycopg2.connect(self.db.login_dsn(1), connect_timeout=10)
        try:
            with conn:
                work, review = producer.enqueue_many(conn, [
                    NewJob("work", queue="sod"),
                    NewJob("review", queue="sod", exclude_keys=["inspector-7"],
                           exclude_completers_of=[in_call(1)])])
                second = producer.enqueue(conn, "second review", queue="sod",
                                          exclude_completers_of=[work.id])
                plain = producer.enqueue(conn, "plain", queue="sod-free")
                with conn.cursor() as cur:
                    cur.execute("SELECT job_id, excluded_key, completer_of FROM job_exclusions "
                                "ORDER BY job_id, excluded_key NULLS LAST")
                    rows = cur.fetchall()
            self.assertEqual(rows, [(review.id, "inspector-7", None), (review.id, None, work.id),
                                    (second.id, None, work.id)])
            self.assertEqual(self.db.scalar(
                "SELECT string_agg(queue, ',' ORDER BY queue) FROM job_queues "
                "WHERE has_exclusions"), "sod")
            self.assertEqual(plain.state, "pending")
            with self.assertRaises(psycopg2.Error) as raised:
                producer.enqueue(conn, "x", exclude_completers_of=[10**12])
            self.assertIn("not a job of this organization", str(raised.exception))
            conn.rollback()
        finally:
            conn.close()

    def test_the_sql_api_takes_exclusions_by_named_job_or_by_reviewer_alone(self) -> None:
        # aclaim_enqueue_many called as a producer's own SQL calls it, with only one of
        # exclude_keys and exclude_jobs: the other is filled with NULLs, one per exclusion.
        conn = psycopg2.connect(self.db.login_dsn(1), connect_timeout=10)
        try:
            with conn, conn.cursor() as cur:
                cur.execute("SELECT id FROM aclaim_enqueue_many(ARRAY['work', 'review'], "
                            "ARRAY['sql-sod', 'sql-sod'], exclude_n => '{2}', "
                            "exclude_jobs => '{-1}') ORDER BY n")
                work, review = (r[0] for r in cur.fetchall())
                cur.execute("SELECT id FROM aclaim_enqueue_many(ARRAY['second review', 'audit'], "
                            "ARRAY['sql-sod', 'sql-sod'], exclude_n => '{1,2,2}', "
                            "exclude_jobs => ARRAY[%s, %s, %s]::bigint[]) ORDER BY n",
                            (work, work, review))
                second, audit = (r[0] for r in cur.fetchall())
                cur.execute("SELECT id FROM aclaim_enqueue_many(ARRAY['keyed'], "
                            "queues => ARRAY['sql-keys'], exclude_n => '{1,1}', "
                            "exclude_keys => '{inspector-1,inspector-2}')")
                keyed = cur.fetchone()[0]
                cur.execute("SELECT job_id, excluded_key, completer_of FROM job_exclusions "
                            "WHERE job_id = ANY(%s) ORDER BY job_id, completer_of, excluded_key",
                            ([review, second, audit, keyed],))
                rows = cur.fetchall()
            self.assertEqual(rows, [(review, None, work), (second, None, work),
                                    (audit, None, work), (audit, None, review),
                                    (keyed, "inspector-1", None), (keyed, "inspector-2", None)])
            self.assertEqual(self.db.scalar(
                "SELECT count(*) FROM job_queues WHERE queue IN ('sql-sod', 'sql-keys') "
                "AND has_exclusions"), 2)
            # Arrays of different lengths, and a job that is not the organization's, are refused
            # with the call's whole enqueue.
            for call, message in (
                    ("exclude_n => '{1,1}', exclude_jobs => ARRAY[%s]::bigint[]" % work,
                     "of one length"),
                    ("exclude_n => '{1}', exclude_jobs => '{999999999}'",
                     "not a job of this organization")):
                with self.assertRaises(psycopg2.Error) as raised:
                    with conn.cursor() as cur:
                        cur.execute("SELECT count(*) FROM aclaim_enqueue_many(ARRAY['x'], "
                                    "ARRAY['sql-bad'], " + call + ")")
                self.assertIn(message, str(raised.exception))
                conn.rollback()
            self.assertEqual(self.db.scalar(
                "SELECT count(*) FROM jobs WHERE queue = 'sql-bad'"), 0)
        finally:
            conn.close()

    def test_oversized_payload_is_refused_with_a_clear_error(self) -> None:
        producer = Producer()
        conn = psycopg2.connect(self.db.login_dsn(1), connect_timeout=10)
        try:
            with self.assertRaises(psycopg2.errors.ProgramLimitExceeded) as raised:
                producer.enqueue(conn, "x" * 200_000)
            self.assertIn("200000 bytes, over the limit of 131072 bytes", str(raised.exception))
            conn.rollback()
        finally:
            conn.close()

    def test_a_producer_of_one_organization_cannot_touch_another(self) -> None:
        with psycopg2.connect(self.db.login_dsn(2), connect_timeout=10) as two:
            theirs = Producer().enqueue(two, "organization 2's")
        two.close()
        conn = psycopg2.connect(self.db.login_dsn(1), connect_timeout=10)
        try:
            with self.assertRaises(psycopg2.errors.InsufficientPrivilege):
                Producer(org=2).enqueue(conn, "into 2")
            conn.rollback()
            self.assertEqual(Producer().cancel(conn, [theirs.id], "hostile"), [])
            self.assertEqual(Producer().status(conn, [theirs.id]), [])
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM jobs WHERE org_id = 2")
                self.assertEqual(cur.fetchone()[0], 0)
                with self.assertRaises(psycopg2.errors.InsufficientPrivilege):
                    cur.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", (theirs.id,))
            conn.rollback()
        finally:
            conn.close()
        self.assertEqual(self.db.scalar("SELECT state FROM jobs WHERE id = %s", theirs.id),
                         "pending")


CRASHING_CONSUMER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from aclaim.consumer import ResultConsumer
c = ResultConsumer(sys.argv[2], "billing", batch=2)
print(" ".join(str(o.job_id) for o in c.fetch()), flush=True)
time.sleep(60)  # killed here, between fetch and acknowledgement
"""


class ConsumerTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.db = Database("consumer")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.db.drop()

    def setUp(self) -> None:
        self.dsn = self.db.login_dsn(1)
        admin(self.db.dsn, "DELETE FROM result_groups")

    def end_jobs(self, count: int, org: int = 1) -> list:
        """Enqueues and cancels jobs in one transaction: each cancellation is a terminal
        outcome, as a completion is."""
        producer = Producer()
        with psycopg2.connect(self.db.login_dsn(org), connect_timeout=10) as conn:
            ids = [e.id for e in producer.enqueue_many(conn, [NewJob(f"j{i}")
                                                              for i in range(count)])]
            producer.cancel(conn, ids, "test")
        conn.close()
        return ids

    def test_killed_between_fetch_and_ack_the_next_consumer_gets_the_same(self) -> None:
        ResultConsumer(self.dsn, "billing").close()  # the group, from now on
        ids = self.end_jobs(3)
        child = subprocess.Popen([sys.executable, "-c", CRASHING_CONSUMER, os.path.dirname(HERE),
                                  self.dsn], stdout=subprocess.PIPE, text=True)
        try:
            fetched = [int(x) for x in child.stdout.readline().split()]
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            child.stdout.close()
        self.assertEqual(fetched, ids[:2])
        with ResultConsumer(self.dsn, "billing", batch=2) as again:
            first = again.fetch()
            self.assertEqual([o.job_id for o in first], ids[:2])
            again.ack(first[-1])
            rest = again.fetch()
            self.assertEqual([o.job_id for o in rest], ids[2:])
            self.assertEqual(rest[0].outcome, "cancelled")
            self.assertEqual(rest[0].error, "cancelled by producer " + self.db.logins[1] + ": test")
            again.ack(rest[-1])
            self.assertEqual(again.fetch(), [])
            self.assertEqual(again.status().lag, 0)

    def test_follow_acknowledges_only_what_was_handled(self) -> None:
        consumer = ResultConsumer(self.dsn, "audit")
        ids = self.end_jobs(4)
        seen = []
        with self.assertRaises(RuntimeError):
            for outcome in consumer.follow(wait=5):
                if len(seen) == 2:
                    raise RuntimeError("handler failed on the third")
                seen.append(outcome.job_id)
        consumer.close()
        with ResultConsumer(self.dsn, "audit") as again:
            rest = [o.job_id for o in again.follow(wait=5, idle_exit=0.5)]
        self.assertEqual(seen + rest, ids)

    def test_a_commit_held_open_is_delivered_after_those_that_committed_later(self) -> None:
        consumer = ResultConsumer(self.dsn, "ledger")
        producer = Producer()
        held = psycopg2.connect(self.dsn, connect_timeout=10)
        try:
            early = producer.enqueue(held, "early")
            held.commit()
            producer.cancel(held, [early.id], "held open")  # its outcome row is written now
            later = self.end_jobs(2)
            first = consumer.fetch()
            self.assertEqual([o.job_id for o in first], later)
            consumer.ack(first[-1])
            held.commit()
        finally:
            held.close()
        late = consumer.next(wait=10)
        self.assertEqual([o.job_id for o in late], [early.id])
        self.assertEqual(late[0].seq, first[-1].seq + 1)
        consumer.close()

    def test_next_is_woken_by_the_commit(self) -> None:
        consumer = ResultConsumer(self.dsn, "wake")
        self.assertEqual(consumer.next(wait=0.05), [])
        # Every query next() makes is counted: a wait woken by the notification looks twice (once
        # before waiting, once on the wake); one that polls looks more often.
        looks = []
        fetch = consumer.fetch
        consumer.fetch = lambda: looks.append(1) or fetch()
        got: list = []
        waiter = threading.Thread(target=lambda: got.extend(consumer.next(wait=120)))
        waiter.start()
        deadline = time.monotonic() + 10
        while not looks and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(len(looks), 1)
        # Quiet for 1.5 s: a poll of a second or less shows as another look. The correct consumer
        # cannot fail this however slow the machine is.
        time.sleep(1.5)
        self.assertEqual(len(looks), 1, "next() looked again without a notification")
        ids = self.end_jobs(1)
        waiter.join(timeout=30)
        # Returned within 30 s of a 120 s wait: the notification ended it, not the deadline.
        self.assertFalse(waiter.is_alive(), "next() was not woken by the commit")
        self.assertEqual([o.job_id for o in got], ids)
        self.assertEqual(len(looks), 2)
        consumer.close()

    def test_groups_of_other_organizations_are_apart(self) -> None:
        mine = ResultConsumer(self.dsn, "shared-name")
        theirs = ResultConsumer(self.db.login_dsn(2), "shared-name")
        self.end_jobs(1, org=2)
        self.assertEqual(mine.fetch(), [])
        self.assertEqual(len(theirs.next(wait=10)), 1)
        with self.assertRaises(psycopg2.errors.InsufficientPrivilege):
            ResultConsumer(self.dsn, "shared-name", org=2)
        mine.close()
        theirs.close()


def main() -> int:
    global BIN_DIR
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin-dir", default=BIN_DIR, help="where aclaimctl is")
    args, rest = parser.parse_known_args()
    BIN_DIR = args.bin_dir
    if not SERVER:
        print("ACLAIM_TEST_DSN is not set: run through compose/dev test", file=sys.stderr)
        return 1
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What an operator meets at the command line, checked by exit code and words: the exit-code
policy of aclaimctl and aclaim-console (docs/operations.md, "Exit codes": 0 done, 1 a finding,
2 a mistake in what was asked, 3 the database out of reach) for a bad argument, an unknown job and
a no-op; one parser for organizations and host:port values; --dsn before or after the command;
the console's errors and settings; ids printed by enqueue; keys; unknown queues; unknown commands;
and the small things of issue 30 (inspect's labels, retention read of a missing file, the Python
client's build output ignored, compose/ha status of a killed member).

  ctl_exit_codes_test.py --bin-dir build/bin --root .

Needs ACLAIM_TEST_DSN (compose/dev test sets it): a database of its own is made on that server.
Prints PASS/FAIL per check and ends with "N passed, M failed".
"""

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

from suite import Checks, arguments, migrated_database, said  # noqa: E402


class Run:
    def __init__(self, bin_dir, dsn):
        self.bin_dir = bin_dir
        self.dsn = dsn
        # No ACLAIM_* from the suite's environment: each call says what it means.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ACLAIM_")}

    def __call__(self, binary, *args, dsn=True, env=None, stdin=None, timeout=60):
        e = dict(self.env)
        if dsn:
            e["ACLAIM_DSN"] = self.dsn
        e.update(env or {})
        try:
            return subprocess.run([os.path.join(self.bin_dir, binary), *args],
                                  capture_output=True, text=True, env=e, input=stdin,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as t:
            # Still running: a refusal that did not come. Reported as exit None.
            text = [(x or b"").decode(errors="replace") if isinstance(x, bytes) else (x or "")
                    for x in (t.stdout, t.stderr)]
            return subprocess.CompletedProcess(t.cmd, None, *text)

    def ctl(self, *args, **kw):
        return self("aclaimctl", *args, **kw)


def exit_codes(c, run):
    """The policy: a bad argument, an unknown job and a no-op all exit 2, and say why."""
    r = run.ctl("enqueue", "--org", "abc", "x")
    c.check(r.returncode == 2 and "'abc' is not an organization id" in r.stderr
            and "179769" not in r.stderr,
            "a bad --org exits 2 and says what an organization id is", said(r))
    r = run.ctl("enqueue", "--org", "0", "x")
    c.check(r.returncode == 2 and "'0' is not an organization id" in r.stderr,
            "--org 0 is refused as the coordinator would", said(r))
    r = run.ctl("enqueue", "--count", "0", "--org", "1")
    c.check(r.returncode == 2, "an out-of-range argument exits 2, not CLI11's 105", said(r))
    r = run.ctl("status", "--no-such-flag")
    c.check(r.returncode == 2 and "--no-such-flag" in r.stderr,
            "an unknown flag exits 2, not CLI11's 109", said(r))
    r = run.ctl("queue", "pause", "--org", "1")
    c.check(r.returncode == 2 and "queue" in r.stderr,
            "a missing argument exits 2, not CLI11's 106", said(r))
    r = run.ctl("inspect", "99999")
    c.check(r.returncode == 2, "inspect of an unknown job exits 2", said(r))
    r = run.ctl("cancel", "99999", "--reason", "x")
    c.check(r.returncode == 2 and "nothing done to job 99999" in r.stderr,
            "cancel of an unknown job exits 2 and names it", said(r))
    r = run.ctl("retry", "99999")
    c.check(r.returncode == 2 and "nothing done to job 99999" in r.stderr,
            "retry of an unknown job exits 2 and names it", said(r))
    r = run.ctl("enqueue", "--org", "1", "--ids", "pending one")
    pending = r.stdout.strip()
    r = run.ctl("retry", pending)
    c.check(r.returncode == 2 and f"nothing done to job {pending}" in r.stderr,
            "retry of a job that is not finished (a no-op) exits 2", said(r))
    r = run.ctl("cancel", "--org", "77", "--reason", "nothing there")
    c.check(r.returncode == 0 and "no job of organization 77 matches" in r.stderr,
            "a filter that matches nothing says so (and is no mistake: exit 0)", said(r))
    r = run.ctl("cancel", pending, "--reason", "done with it")
    c.check(r.returncode == 0 and "cancelled 1 of 1 jobs" in r.stdout, "a cancel that acts exits 0",
            said(r))
    r = run.ctl("status", dsn=False, env={"ACLAIM_DSN": "postgresql://nobody@127.0.0.1:1/none"})
    c.check(r.returncode == 3 and "cannot reach the database" in r.stderr,
            "an unreachable database exits 3", said(r))
    r = run.ctl("status", dsn=False)
    c.check(r.returncode == 2 and "no database given" in r.stderr
            and "after the command" in r.stderr, "no database exits 2 and says how to give one",
            said(r))

def one_exit_rule(c, run):
    """Issue 50 item 4: every program refuses a malformed setting or argument with exit 2 and
    names it, whether it came from the command line or from the ACLAIM_* variable; not CLI11's
    own 104/105/109, which a systemd unit takes for a crash and restarts every 2 s."""
    cases = [
        ("aclaim-coordinator", [], {"ACLAIM_LEASE_MS": "abc"}, "ACLAIM_LEASE_MS"),
        ("aclaim-coordinator", [], {"ACLAIM_COALESCE": "maybe"}, "ACLAIM_COALESCE"),
        ("aclaim-coordinator", ["--bogus"], {}, "'--bogus' is not an option"),
        ("aclaim-coordinator", ["--bind", "nonsense"], {}, "'nonsense'"),
        ("aclaim-coordinator", [], {"ACLAIM_BIND": "nonsense"}, "--bind"),
        ("aclaim-worker", [], {"ACLAIM_REVIEW_MS": "abc"}, "ACLAIM_REVIEW_MS"),
        ("aclaim-worker", ["--bogus"], {}, "'--bogus' is not an option"),
        ("aclaim-console", ["serve"], {"ACLAIM_LISTEN": "nonsense"}, "ACLAIM_LISTEN"),
        ("aclaim-console", ["--bogus"], {}, "'--bogus' is not an option"),
        ("aclaim-console", ["serve"], {"ACLAIM_CONNECT_TIMEOUT": "abc"}, "ACLAIM_CONNECT_TIMEOUT"),
        ("aclaim-console", ["serve"], {"ACLAIM_STATEMENT_TIMEOUT": "-1"},
         "ACLAIM_STATEMENT_TIMEOUT"),
        ("aclaimctl", ["status"], {"ACLAIM_CONNECT_TIMEOUT": "abc"}, "ACLAIM_CONNECT_TIMEOUT"),
        ("aclaimctl", ["status"], {"ACLAIM_STATEMENT_TIMEOUT": "-1"}, "ACLAIM_STATEMENT_TIMEOUT"),
        ("aclaimctl", ["--bogus"], {}, "'--bogus' is not an option"),
    ]
    for binary, args, env, named in cases:
        # The coordinator and worker need an address to get that far; a refusal comes first.
        extra = {"ACLAIM_DSN": run.dsn} if binary == "aclaim-coordinator" else {}
        if binary == "aclaim-worker":
            extra = {"ACLAIM_CONNECT": "tcp://127.0.0.1:1", "ACLAIM_ORG": "1"}
        extra.update(env)
        r = run(binary, *args, dsn=False, env=extra, timeout=20)
        what = " ".join([binary, *args] + [f"{k}={v}" for k, v in env.items()])
        c.check(r.returncode == 2 and named in r.stderr,
                f"{what} exits 2 and names {named}", said(r))
    r = run("aclaim-console", "operator", "add", "nobody", stdin="\n")
    c.check(r.returncode == 2 and "password" in r.stderr,
            "operator add with an empty password exits 2 (a refused argument)", said(r))
    r = run.ctl("status", dsn=False, env={"ACLAIM_DSN": "not a dsn"})
    c.check(r.returncode == 2 and "is not a libpq conninfo or URI" in r.stderr
            and "cannot reach" not in r.stderr,
            "--dsn 'not a dsn' exits 2 (a mistake), not 3 (an outage)", said(r))


def hung_database(c, run):
    """Issue 50 item 3: a database that accepts connections and never answers. aclaimctl gives
    up after --connect-timeout (docs/operations.md: per host address, whole seconds, 1 taken as
    2) and exits 3, instead of waiting forever."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # and never a byte back
            except socket.timeout:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        hung = f"postgresql://aclaim@127.0.0.1:{port}/aclaim"
        bound = 2
        start = time.monotonic()
        r = run.ctl("status", dsn=False, env={"ACLAIM_DSN": hung,
                                              "ACLAIM_CONNECT_TIMEOUT": str(bound)}, timeout=30)
        took = time.monotonic() - start
        # The bound plus a second for starting the process on a loaded machine.
        c.check(r.returncode == 3 and "cannot reach the database" in r.stderr
                and took < bound + 1.0 and held,
                f"status against a listener that never answers exits 3 within {bound} s "
                f"(took {took:.1f} s)", said(r))
        start = time.monotonic()
        r = run.ctl("status", dsn=False, env={"ACLAIM_DSN": hung}, timeout=30)
        took = time.monotonic() - start
        c.check(r.returncode == 3 and took < 10 + 1.0,
                f"and within the default 10 s with no setting (took {took:.1f} s)", said(r))
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        listener.close()
    # A database that answers the connection but not the statement (a lock nobody releases):
    # --statement-timeout ends it, exit 3 too.
    blocker = psycopg2.connect(run.dsn)
    try:
        with blocker.cursor() as cur:
            cur.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        start = time.monotonic()
        r = run.ctl("status", env={"ACLAIM_STATEMENT_TIMEOUT": "1"}, timeout=30)
        took = time.monotonic() - start
        c.check(r.returncode == 3 and "did not answer within --statement-timeout" in r.stderr
                and took < 1 + 2.0,
                f"a statement held past --statement-timeout 1 exits 3 (took {took:.1f} s)",
                said(r))
    finally:
        blocker.rollback()
        blocker.close()


def dsn_anywhere(c, run):
    for args in (["status", "--dsn", run.dsn], ["--dsn", run.dsn, "status"],
                 ["queue", "list", "--dsn", run.dsn]):
        r = run.ctl(*args, dsn=False)
        c.check(r.returncode == 0, f"aclaimctl {' '.join(a if a != run.dsn else 'DSN' for a in args)}",
                said(r))


def commands(c, run):
    r = run.ctl("frob", dsn=False)
    c.check(r.returncode == 2 and "'frob' is not a command" in r.stderr
            and "enqueue" in r.stderr and "A subcommand is required" not in r.stderr,
            "an unknown command is called that, with the real ones", said(r))
    r = run.ctl("queue", "frob", dsn=False)
    c.check(r.returncode == 2 and "'frob' is not a command" in r.stderr and "pause" in r.stderr,
            "an unknown queue command too", said(r))
    r = run.ctl(dsn=False)
    c.check(r.returncode == 2 and "a command is required" in r.stderr, "no command exits 2",
            said(r))
    r = run.ctl("--version", dsn=False)
    c.check(r.returncode == 0 and re.match(r"aclaimctl \d+\.\d+\.\d+", r.stdout) is not None,
            "aclaimctl --version prints the version", said(r))
    r = run("aclaim-console", "--version", dsn=False)
    c.check(r.returncode == 0 and r.stdout.startswith("aclaim-console "),
            "aclaim-console --version prints the version", said(r))


def console(c, run):
    r = run("aclaim-console", "serve", dsn=False)
    c.check(r.returncode == 2 and "no database given" in r.stderr,
            "the console without a database exits 2 and says how to give one", said(r))
    r = run("aclaim-console", "serve", "--listen", "127.0.0.1:abc")
    c.check(r.returncode == 2 and "'127.0.0.1:abc' is not host:port" in r.stderr
            and "stoi" not in r.stderr, "a bad --listen exits 2 and says why", said(r))
    r = run("aclaim-console", "serve", env={"ACLAIM_LISTEN": "127.0.0.1:99999"}, timeout=10)
    c.check(r.returncode == 2 and "is not host:port" in r.stderr,
            "--listen is read from ACLAIM_LISTEN", said(r))
    r = run("aclaim-console", "serve", "--help", dsn=False)
    c.check(r.returncode == 0 and "=127.0.0.1:8090" in r.stdout and "(Env:ACLAIM_LISTEN)" in r.stdout
            and "(Env:ACLAIM_REPORTS)" in r.stdout,
            "serve --help shows --listen's default and both variables", said(r))
    r = run("aclaim-console", "serve", dsn=False, env={"ACLAIM_DSN": "not a dsn"}, timeout=20)
    c.check(r.returncode == 2 and "is not a libpq conninfo or URI" in r.stderr
            and "cannot reach" not in r.stderr,
            "the console's --dsn 'not a dsn' exits 2 (a mistake), not 3 (an outage)", said(r))
    r = run("aclaim-console", "operator", "remove", "nobody")
    c.check(r.returncode == 2 and "there is no operator nobody" in r.stderr,
            "operator remove of an unknown name exits 2", said(r))
    r = run("aclaim-console", "operator", "add", "x", "--org", "abc")
    c.check(r.returncode == 2 and "'abc' is not an organization id" in r.stderr,
            "the console parses --org as aclaimctl does", said(r))
    # --dsn after the command, and a console that starts and stops.
    env = dict(run.env)
    p = subprocess.Popen([os.path.join(run.bin_dir, "aclaim-console"), "serve", "--dsn", run.dsn,
                          "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        c.check(line.startswith("console: http://127.0.0.1:"),
                "aclaim-console serve --dsn DSN (after the command) serves", repr(line))
    finally:
        p.terminate()
        p.wait(timeout=30)


def worker(c, run):
    r = run("aclaim-worker", "--org", "0", "--connect", "tcp://127.0.0.1:1", dsn=False,
            timeout=20)
    c.check(r.returncode != 0 and "'0' is not an organization id" in r.stderr,
            "the worker refuses --org 0 as the coordinator would", said(r))
    r = run("aclaim-worker", "--help", dsn=False)
    org = [line for line in r.stdout.splitlines() if line.strip().startswith("--org")]
    c.check(len(org) == 1 and "--org ORG " in org[0] and "NONNEGATIVE" not in org[0],
            "the worker's help says ORG, not INT:NONNEGATIVE", said(r))
    r = run.ctl("enqueue", "--help", dsn=False)
    org = [line for line in r.stdout.splitlines() if line.strip().startswith("--org")]
    c.check(len(org) == 1 and "--org ORG " in org[0], "so does aclaimctl's", said(r))
    r = run.ctl("inspect", "abc")
    c.check(r.returncode == 2 and "'abc' is not a whole number from 1 up" in r.stderr,
            "a job id is checked in the same words", said(r))


def enqueue_and_keys(c, run, scratch):
    r = run.ctl("enqueue", "--org", "1", "one review")
    m = re.search(r": job (\d+)$", r.stdout.strip())
    c.check(r.returncode == 0 and m is not None, "enqueue prints the id it made", said(r))
    r = run.ctl("enqueue", "--org", "1", "--ids", "a", "b")
    ids = r.stdout.split()
    c.check(r.returncode == 0 and len(ids) == 2 and all(i.isdigit() for i in ids)
            and "enqueued 2 jobs" in r.stderr, "--ids prints only the ids", said(r))
    keys = os.path.join(scratch, "keys")
    r = run.ctl("keys", "generate", "sparky", "--out-dir", keys, dsn=False)
    c.check(r.returncode == 0 and os.path.exists(os.path.join(keys, "sparky.key")),
            "keys generate NAME names the key files", said(r))
    public = r.stdout.strip()
    r = run.ctl("keys", "register", "--org", "1", "--name", "sparky", "--public-key", public,
                "--queues", "electrical,default")
    c.check(r.returncode == 0, "keys register", said(r))
    r = run.ctl("keys", "list")
    c.check(r.returncode == 0 and re.search(r"sparky\s+electrical,default\s+-", r.stdout),
            "keys list shows a key's queues", said(r))
    r = run.ctl("keys", "list", "--json")
    ok = r.returncode == 0 and any(k.get("queues") == ["electrical", "default"]
                                   for k in json.loads(r.stdout)["keys"])
    c.check(ok, "keys list --json too", said(r))


def queues(c, run, conn_dsn):
    run.ctl("enqueue", "--org", "1", "--queue", "electrical", "--new-queue", "panel 12")
    r = run.ctl("queue", "pause", "nosuchqueue", "--org", "1")
    c.check(r.returncode == 2 and "has no queue 'nosuchqueue'" in r.stderr
            and "electrical" in r.stderr and "--create" in r.stderr,
            "pausing a queue that does not exist exits 2 and lists the real ones", said(r))
    r = run.ctl("queue", "set", "nosuchqueue", "--org", "1", "--max-assigned", "2")
    c.check(r.returncode == 2 and "has no queue" in r.stderr, "so does setting one", said(r))
    conn = psycopg2.connect(conn_dsn)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM job_queues WHERE queue = 'nosuchqueue'")
        c.check(cur.fetchone()[0] == 0, "and no queue was made")
    conn.close()
    r = run.ctl("queue", "pause", "electrical", "--org", "1", "--reason", "training")
    c.check(r.returncode == 0 and "paused" in r.stdout, "a queue that exists is paused", said(r))
    r = run.ctl("queue", "resume", "electrical", "--org", "1")
    c.check(r.returncode == 0, "and resumed", said(r))
    r = run.ctl("queue", "set", "welding", "--org", "1", "--create", "--max-assigned", "2")
    c.check(r.returncode == 0, "--create makes a new queue on purpose", said(r))


def results(c, run):
    # A verdict before the group exists: a cancelled job's.
    r = run.ctl("enqueue", "--org", "5", "--ids", "to cancel")
    job = r.stdout.strip()
    run.ctl("cancel", job, "--reason", "a verdict to follow")
    r = run.ctl("results", "follow", "--group", "late", "--org", "5", "--idle-exit", "1s")
    c.check(r.returncode == 0 and r.stdout == "" and "--from earliest" in r.stderr
            and "not delivered" in r.stderr,
            "a group made at latest says the verdicts before it are not delivered", said(r))
    r = run.ctl("results", "follow", "--group", "early", "--org", "5", "--from", "earliest",
                "--json", "--idle-exit", "1s")
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    c.check(r.returncode == 0 and any(v["job_id"] == int(job) for v in lines),
            "a group made at earliest gets the verdict already committed", said(r))


def small_things(c, run, root):
    r = run.ctl("retention", "read", "/nonexistent/job_events_2026_01.events.jsonl")
    c.check(r.returncode == 2 and "No such file or directory" in r.stderr
            and "retention archive" in r.stderr,
            "retention read of a missing file says why and where archives are", said(r))
    r = run.ctl("enqueue", "--org", "1", "--delay", "1h", "--ids", "later")
    job = r.stdout.strip()
    run.ctl("cancel", job, "--reason", "never ran")
    r = run.ctl("inspect", job)
    c.check(r.returncode == 0 and "ran at" not in r.stdout and "claimable from" in r.stdout,
            "inspect does not say a job that never ran ran", said(r))
    made = ["clients/python/build/lib/aclaim/__init__.py", "clients/python/aclaim.egg-info/PKG-INFO"]
    git = subprocess.run(["git", "-C", root, "check-ignore", *made], capture_output=True,
                         text=True)
    if git.returncode == 128 and "not a git repository" in git.stderr:
        print("SKIP: the offline pip install's output is ignored by git (not a git checkout)")
    else:
        c.check(git.stdout.split() == made,
                "the offline pip install's build/ and egg-info are ignored by git", said(git))


def issue50(c, run, conn_dsn, root, scratch):
    """Issue 50 items 5, 6, 8, 9 and 11, aclaimctl's part."""
    # 5: a misspelt queue on enqueue is refused as `queue set` refuses it.
    run.ctl("enqueue", "--org", "3", "--queue", "electrical", "--new-queue", "first")
    r = run.ctl("enqueue", "--org", "3", "--queue", "electrcal", "typo")
    c.check(r.returncode == 2 and "has no queue 'electrcal'" in r.stderr
            and "default, electrical" in r.stderr and "--new-queue" in r.stderr,
            "enqueue --queue electrcal (a typo) exits 2 with the organization's queues", said(r))
    conn = psycopg2.connect(conn_dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM jobs WHERE queue = 'electrcal'")
        c.check(cur.fetchone()[0] == 0, "and no job was made in it")
    r = run.ctl("enqueue", "--org", "3", "--queue", "electrical", "known")
    c.check(r.returncode == 0, "a queue with jobs is known", said(r))
    r = run.ctl("enqueue", "--org", "4", "fresh organization, default queue")
    c.check(r.returncode == 0, "the default queue is always known", said(r))
    run.ctl("queue", "set", "welding", "--org", "3", "--create", "--max-assigned", "2")
    r = run.ctl("enqueue", "--org", "3", "--queue", "welding", "configured, no job yet")
    c.check(r.returncode == 0, "a queue with settings is known", said(r))
    # 6: an unknown dependency is a mistake in what was asked, said in one line.
    r = run.ctl("enqueue", "--org", "3", "--depends-on", "99999", "waits")
    c.check(r.returncode == 2 and "dependency 99999" in r.stderr and "CONTEXT" not in r.stderr
            and "PL/pgSQL" not in r.stderr,
            "enqueue --depends-on 99999 exits 2 with no PL/pgSQL CONTEXT", said(r))
    # 8: --json on the listings, one timestamp format.
    run.ctl("schedule", "add", "nightly", "--org", "3", "--cron", "30 2 * * *")
    iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
    r = run.ctl("queue", "list", "--org", "3", "--json")
    try:
        qs = {q["queue"]: q for q in json.loads(r.stdout)["queues"]}
        ok = qs["welding"]["max_assigned"] == 2 and qs["electrical"]["pending"] == 2
    except (ValueError, KeyError):
        ok = False
    c.check(r.returncode == 0 and ok, "queue list --json", said(r))
    r = run.ctl("schedule", "list", "--org", "3", "--json")
    try:
        s = json.loads(r.stdout)["schedules"][0]
        ok = s["name"] == "nightly" and iso.match(s["next_tick"]) is not None
    except (ValueError, KeyError, IndexError):
        ok = False
    c.check(r.returncode == 0 and ok, "schedule list --json, its ticks in ISO 8601 with Z",
            said(r))
    r = run.ctl("keys", "list", "--json")
    try:
        ok = all(iso.match(k["created_at"]) for k in json.loads(r.stdout)["keys"])
    except (ValueError, KeyError):
        ok = False
    c.check(r.returncode == 0 and ok and "+00" not in r.stdout,
            "keys list --json prints ISO 8601 with Z, not PostgreSQL's text", said(r))
    # 9: records carry what the flags offer.
    jsonl = os.path.join(scratch, "records.jsonl")
    with open(jsonl, "w") as f:
        f.write(json.dumps({"org": 3, "payload": "rec a", "queue": "welding",
                            "dedupe_key": "rec-a", "run_at": "2099-01-01T00:00:00Z",
                            "exclude_keys": ["sparky"]}) + "\n")
        f.write(json.dumps({"org": 3, "payload": "rec b", "depends_on": [99999]}) + "\n")
    r = run.ctl("enqueue", "--jsonl", jsonl)
    c.check(r.returncode == 2 and "dependency 99999" in r.stderr,
            "a record's depends_on is applied (and an unknown one refused)", said(r))
    with open(jsonl, "w") as f:
        f.write(json.dumps({"org": 3, "payload": "rec a", "queue": "welding",
                            "dedupe_key": "rec-a", "run_at": "2099-01-01T00:00:00Z",
                            "exclude_keys": ["sparky"]}) + "\n")
    r = run.ctl("enqueue", "--jsonl", jsonl)
    with conn.cursor() as cur:
        cur.execute("SELECT queue, dedupe_key, state, aclaim_us(run_at) FROM jobs "
                    "WHERE payload = 'rec a'")
        row = cur.fetchone()
    c.check(r.returncode == 0 and row is not None and row[0] == "welding" and row[1] == "rec-a"
            and row[2] == "scheduled", "a JSON line sets its queue, dedupe key and run time",
            said(r) + f"; row {row}")
    csv = os.path.join(scratch, "records.csv")
    with open(csv, "w") as f:
        f.write("org,payload,queue,dedupe_key,run_at\n"
                "3,rec c,welding,rec-c,2099-01-01T00:00:00Z\n")
    r = run.ctl("enqueue", "--csv", csv)
    with conn.cursor() as cur:
        cur.execute("SELECT queue, dedupe_key, state FROM jobs WHERE payload = 'rec c'")
        row = cur.fetchone()
    c.check(r.returncode == 0 and row == ("welding", "rec-c", "scheduled"),
            "a CSV record sets its queue, dedupe key and run time", said(r) + f"; row {row}")
    # 11: a run time in the past is refused unless meant.
    r = run.ctl("enqueue", "--org", "3", "--run-at", "2026-01-02T08:00:00Z", "morning round")
    c.check(r.returncode == 2 and "in the past" in r.stderr and "--allow-past" in r.stderr,
            "--run-at in the past exits 2", said(r))
    r = run.ctl("enqueue", "--org", "3", "--run-at", "2026-01-02T08:00:00Z", "--allow-past",
                "morning round")
    c.check(r.returncode == 0, "--allow-past accepts it", said(r))
    git = subprocess.run(["git", "-C", root, "check-ignore", "keys/sparky.key"],
                         capture_output=True, text=True)
    if git.returncode == 128 and "not a git repository" in git.stderr:
        print("SKIP: keys/ is ignored by git (not a git checkout)")
    else:
        c.check(git.stdout.strip() == "keys/sparky.key",
                "keys/ (the README's keys generate --out-dir keys) is ignored by git", said(git))
    # retention status: a partition never analyzed holds rows; it is not shown as ~0.
    with conn.cursor() as cur:
        cur.execute("SELECT p.name FROM job_event_partitions p JOIN pg_class c "
                    "ON c.oid = to_regclass(p.name) WHERE c.reltuples < 0")
        never = [x[0] for x in cur.fetchall()]
        counts = {}
        for name in never:
            cur.execute(f"SELECT count(*) FROM {name}")
            counts[name] = cur.fetchone()[0]
    conn.close()
    r = run.ctl("retention", "status")
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("  job_events")}
    held = [n for n, k in counts.items() if k > 0]
    # (autovacuum may analyze it meanwhile: then its estimate, which is no longer 0)
    ok = bool(held) and all(n in lines and re.search(r"~0\b", lines[n]) is None
                            and ("not analyzed" in lines[n] or re.search(r"~[1-9]", lines[n]))
                            for n in held)
    c.check(r.returncode == 0 and ok,
            f"retention status says 'not analyzed' for a never-analyzed partition holding rows "
            f"({counts}), not ~0", said(r))


class Cluster(http.server.BaseHTTPRequestHandler):
    """Patroni's REST API of a live member just after pg1, the primary, was killed: the DCS still
    names pg1 leader until its key expires."""

    def do_GET(self):
        body = json.dumps({"members": [
            {"name": "pg1", "role": "leader", "state": "running", "timeline": 1},
            {"name": "pg2", "role": "sync_standby", "state": "streaming", "timeline": 1, "lag": 0},
            {"name": "pg3", "role": "replica", "state": "streaming", "timeline": 1, "lag": 0},
        ]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def ha_status(c, root, scratch):
    server = http.server.HTTPServer(("127.0.0.1", 0), Cluster)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    d = os.path.join(scratch, "ha")
    os.makedirs(d)
    port = server.server_address[1]
    with open(os.path.join(d, "ports.env"), "w") as f:
        for i, m in enumerate(("pg1", "pg2", "pg3")):
            f.write(f"pg_port_{m}={15432 + i}\nrest_port_{m}={port}\n")
    dead = subprocess.Popen(["true"])
    dead.wait()
    with open(os.path.join(d, "patroni-pg1.pid"), "w") as f:
        f.write(str(dead.pid))
    for m in ("pg2", "pg3"):
        with open(os.path.join(d, f"patroni-{m}.pid"), "w") as f:
            f.write(str(os.getpid()))
    r = subprocess.run([os.path.join(root, "compose", "ha"), "status", "--dir", d],
                       capture_output=True, text=True, timeout=30)
    server.shutdown()
    pg1 = [line for line in r.stdout.splitlines() if line.startswith("pg1 ")]
    c.check(r.returncode == 0 and len(pg1) == 1 and "running" not in pg1[0] and "down" in pg1[0],
            "compose/ha status shows a killed primary down, not 'leader running'", said(r))


def main():
    a = arguments(__doc__, "--bin-dir", "--root")
    c = Checks()
    with migrated_database(c, a.bin_dir, f"aclaim_exit_codes_{os.getpid()}") as dsn, \
            tempfile.TemporaryDirectory(prefix="aclaim-exit-codes-") as scratch:
        run = Run(os.path.abspath(a.bin_dir), dsn)
        exit_codes(c, run)
        one_exit_rule(c, run)
        hung_database(c, run)
        dsn_anywhere(c, run)
        commands(c, run)
        console(c, run)
        worker(c, run)
        enqueue_and_keys(c, run, scratch)
        queues(c, run, dsn)
        results(c, run)
        small_things(c, run, os.path.abspath(a.root))
        issue50(c, run, dsn, os.path.abspath(a.root), scratch)
        ha_status(c, os.path.abspath(a.root), scratch)
    return c.result()


if __name__ == "__main__":
    sys.exit(main())

"""What the suite's Python tests share: counting checks, describing a finished process, the
checkout's VERSION, a free port and the suite's PostgreSQL (ACLAIM_TEST_DSN).

A test script puts this folder on its path and imports what it needs:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    from suite import Checks, said  # noqa: E402

Importing it also puts the Python client's test helpers on the path: the DSN helpers are
sqlapi_support's (clients/python/tests), one definition for both test trees:

    from sqlapi_support import admin, with_database  # noqa: E402
"""

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))


class Checks:
    """Counts checks and prints PASS/FAIL for each; with timed, the seconds since the start
    too (where the time goes when a test runs long)."""

    def __init__(self, timed=False):
        self.passed = 0
        self.failed = 0
        self.timed = timed
        self.started = time.monotonic()

    def check(self, ok, what, why=""):
        at = f"[{time.monotonic() - self.started:5.1f} s] " if self.timed else ""
        if ok:
            self.passed += 1
            print(f"PASS: {at}{what}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL: {at}{what}" + (f"\n      {why}" if why else ""), flush=True)
        return ok

    def result(self):
        """Prints "N passed, M failed" (and the seconds taken, when timed); the exit status."""
        took = f" in {time.monotonic() - self.started:.0f} s" if self.timed else ""
        print(f"{self.passed} passed, {self.failed} failed{took}", flush=True)
        return 1 if self.failed else 0


def checkout_version(root):
    """The first line of the checkout's VERSION file."""
    with open(os.path.join(root, "VERSION")) as f:
        return f.readline().strip()


def said(done, tail=600):
    """A finished process's exit status and the ends of its output, for a failed check."""
    return (f"exit {done.returncode}; stdout {done.stdout[-tail:]!r}; "
            f"stderr {done.stderr[-tail:]!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def arguments(doc, *required, **described):
    """The command line of a test script: each of required (a flag, "--bin-dir") must be given, and
    so must each of described (bin_dir="what it is", for --bin-dir with a help text)."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in required:
        ap.add_argument(flag, required=True)
    for name, text in described.items():
        ap.add_argument("--" + name.replace("_", "-"), required=True, help=text)
    return ap.parse_args()


@contextlib.contextmanager
def migrated_database(checks, bin_dir, name):
    """A fresh database NAME on the suite's server, migrated by aclaimctl (a check): its DSN, for
    the with block; dropped afterwards, its connections closed. Exits 1 when ACLAIM_TEST_DSN is
    not set or the migration fails."""
    from sqlapi_support import admin, with_database

    server = suite_server()
    if not server:
        sys.exit(1)
    admin(server, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}")
    try:
        dsn = with_database(server, name)
        r = subprocess.run([os.path.join(bin_dir, "aclaimctl"), "--dsn", dsn, "migrate"],
                           capture_output=True, text=True, timeout=120)
        if not checks.check(r.returncode == 0, "migrate", said(r)):
            sys.exit(1)
        yield dsn
    finally:
        # A moment for the programs the test stopped to close their connections.
        time.sleep(0.2)
        admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def suite_server():
    """ACLAIM_TEST_DSN, or None after saying that it is not set."""
    server = os.environ.get("ACLAIM_TEST_DSN")
    if not server:
        print("ACLAIM_TEST_DSN is not set: run through compose/dev test", file=sys.stderr)
    return server

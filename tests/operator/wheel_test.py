#!/usr/bin/env python3
"""The Python client as a release ships it: the sdist and the wheel built from a copy of
clients/python alone (python3-build, no network, so --no-isolation), the wheel installed with pip
(--no-index --no-deps) into a fresh venv that sees Debian's python3-zmq and python3-psycopg2, and from there
`import aclaim` reports the project's VERSION and the client's example reviewer
(clients/python/examples/reviewer.py) completes jobs served by a real aclaim-coordinator.

  wheel_test.py --bin-dir build/bin --root .

The database: one of its own on ACLAIM_TEST_DSN's server when that is set (the suite's), else a
throwaway PostgreSQL from compose/pgtmp, stopped at the end. Run with /usr/bin/python3 (the
suite's ACLAIM_PYTHON): the venv is made from the Python that runs this. Prints PASS/FAIL per
check and ends with "N passed, M failed".
"""

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

from suite import Checks, arguments, checkout_version, free_port, said  # noqa: E402
from sqlapi_support import admin, with_database  # noqa: E402

JOBS = 10


class Database:
    """A database of this test's own: on the suite's server, or on a throwaway one."""

    def __init__(self, root, work):
        self.root = root
        self.pg_dir = None
        self.server = os.environ.get("ACLAIM_TEST_DSN", "")
        self.name = f"aclaim_wheel_{os.getpid()}"
        if self.server:
            admin(self.server, f"CREATE DATABASE {self.name}")
            self.dsn = with_database(self.server, self.name)
        else:
            # pgtmp runs the server as the postgres user: its folder must not sit inside a
            # folder only root may enter, as `work` is.
            self.pg_dir = tempfile.mkdtemp(prefix="aclaim-wheel-pg-")
            self.dsn = subprocess.run([os.path.join(root, "compose", "pgtmp"), "start",
                                       self.pg_dir, "--fast"], check=True, capture_output=True,
                                      text=True, timeout=120).stdout.strip()

    def completed(self):
        conn = psycopg2.connect(self.dsn, connect_timeout=10)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM jobs WHERE state = 'completed'")
                return cur.fetchone()[0]
        finally:
            conn.close()

    def close(self):
        if self.pg_dir:
            subprocess.run([os.path.join(self.root, "compose", "pgtmp"), "stop", self.pg_dir],
                           capture_output=True, timeout=120)
        else:
            admin(self.server, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def build(c, root, work, version):
    """The sdist and the wheel, from a copy of clients/python: the build writes build/ and
    *.egg-info beside the sources, which stay out of the checkout."""
    src = os.path.join(work, "src")
    shutil.copytree(os.path.join(root, "clients", "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info"))
    dist = os.path.join(work, "dist")
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel",
                        "--outdir", dist, src], capture_output=True, text=True, timeout=300)
    wheel = os.path.join(dist, f"aclaim-{version}-py3-none-any.whl")
    sdist = os.path.join(dist, f"aclaim-{version}.tar.gz")
    c.check(r.returncode == 0 and os.path.exists(wheel) and os.path.exists(sdist),
            f"python3 -m build makes aclaim-{version}.tar.gz and aclaim-{version}-py3-none-any.whl",
            said(r, 800) + f"; dist holds {os.listdir(dist) if os.path.isdir(dist) else 'nothing'}")
    if not os.path.exists(wheel):
        return None
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    c.check("aclaim/py.typed" in names and "aclaim/_version.py" in names,
            "the wheel ships py.typed and _version.py", repr(names))
    if os.path.exists(sdist):
        with tarfile.open(sdist) as t:
            names = t.getnames()
        c.check(f"aclaim-{version}/aclaim/py.typed" in names
                and f"aclaim-{version}/pyproject.toml" in names,
                "the sdist ships py.typed and pyproject.toml", repr(names))
    return wheel


def install(c, work, wheel, version):
    """A fresh venv seeing the system's site-packages, and the wheel in it. The venv gets no pip
    of its own (copying pip in is most of a venv's making): the system's pip installs into it."""
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                   check=True, timeout=300)
    python = os.path.join(venv, "bin", "python")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PIP_FIND_LINKS", None)
    r = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index",
                        "--no-deps", wheel],
                       capture_output=True, text=True, env=env, timeout=300)
    c.check(r.returncode == 0 and f"Successfully installed aclaim-{version}" in r.stdout,
            f"pip installs the wheel into a fresh venv", said(r, 800))
    # From the scratch folder, not the checkout: the import must find the venv's copy.
    r = subprocess.run([python, "-c", "import aclaim, importlib.metadata as m; "
                        "print(aclaim.__version__); print(m.version('aclaim')); "
                        "print(aclaim.__file__)"],
                       capture_output=True, text=True, cwd=work, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    lines = r.stdout.splitlines()
    c.check(r.returncode == 0 and lines[:2] == [version, version]
            and len(lines) == 3 and lines[2].startswith(venv),
            f"in the venv, aclaim.__version__ and the installed metadata say {version}", said(r, 800))
    return python


def serve(c, root, bin_dir, work, python, db):
    """A coordinator, JOBS jobs and the example reviewer from the venv, until all are done."""
    ctl = os.path.join(bin_dir, "aclaimctl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLAIM_") and k != "PYTHONPATH"}
    for args in (["migrate"], ["enqueue", "--org", "1", "--count", str(JOBS)]):
        r = subprocess.run([ctl, "--dsn", db.dsn, *args], capture_output=True, text=True,
                           env=env, timeout=120)
        if not c.check(r.returncode == 0, f"aclaimctl {' '.join(args)}", said(r, 800)):
            return
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    with open(os.path.join(work, "coordinator.log"), "wb") as log:
        coordinator = subprocess.Popen(
            [os.path.join(bin_dir, "aclaim-coordinator"), "--dsn", db.dsn, "--bind", endpoint,
             "--http-bind", "", "--plaintext", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
    reviewer_out = os.path.join(work, "reviewer.log")
    with open(reviewer_out, "wb") as log:
        reviewer = subprocess.Popen(
            [python, os.path.join(root, "clients", "python", "examples", "reviewer.py"),
             "--connect", endpoint, "--org", "1", "--id", "wheel-reviewer"],
            stdout=log, stderr=subprocess.STDOUT, cwd=work, env=env)
    try:
        deadline = time.monotonic() + 120
        done = 0
        while time.monotonic() < deadline and reviewer.poll() is None:
            done = db.completed()
            if done == JOBS:
                break
            time.sleep(0.2)
        c.check(done == JOBS, f"the venv's example reviewer completes all {JOBS} jobs",
                f"{done} completed; reviewer exit {reviewer.poll()}")
        reviewer.send_signal(signal.SIGTERM)
        code = reviewer.wait(timeout=30)
        with open(reviewer_out, errors="replace") as f:
            out = f.read()
        c.check(code == 0 and f"stopped: {JOBS} completed, 0 failed" in out,
                "the reviewer stops on SIGTERM and reports its completions",
                f"exit {code}; output {out[-800:]!r}")
    finally:
        if reviewer.poll() is None:
            reviewer.kill()
            reviewer.wait()
        coordinator.send_signal(signal.SIGTERM)
        try:
            coordinator.wait(timeout=30)
        except subprocess.TimeoutExpired:
            coordinator.kill()
            coordinator.wait()
    r = subprocess.run([ctl, "--dsn", db.dsn, "check"], capture_output=True, text=True, env=env,
                       timeout=120)
    c.check(r.returncode == 0, "aclaimctl check finds the guarantees kept", said(r, 800))


def main():
    args = arguments(__doc__, "--bin-dir", root="the checkout (VERSION, clients/python)")
    root = os.path.abspath(args.root)
    bin_dir = os.path.abspath(args.bin_dir)
    version = checkout_version(root)
    c = Checks(timed=True)
    with tempfile.TemporaryDirectory(prefix="aclaim-wheel-") as work:
        wheel = build(c, root, work, version)
        if wheel:
            python = install(c, work, wheel, version)
            db = Database(root, work)
            try:
                serve(c, root, bin_dir, work, python, db)
            finally:
                db.close()
    return c.result()


if __name__ == "__main__":
    sys.exit(main())

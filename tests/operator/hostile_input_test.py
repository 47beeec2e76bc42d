#!/usr/bin/env python3
"""What aclaimctl and aclaim-console do with input a hostile tenant or a careless operator hands
them (docs/security.md, the threat model): a key file or link planted in the output folder of
`keys generate`, a JSON line nested 100,000 deep given to `enqueue --jsonl`, a cell map nested as
deep, an id beyond bigint in a console path, and a console request body nested as deep. Each is
refused with exit 2 or HTTP 400 and a sentence naming what is wrong, and nothing is written.

  hostile_input_test.py --bin-dir build/bin

Needs ACLAIM_TEST_DSN (compose/dev test sets it): a database of its own is made on that server.
Prints PASS/FAIL per check and ends with "N passed, M failed".
"""

import http.cookiejar
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

from suite import Checks, arguments, migrated_database, said  # noqa: E402

DEEP = 100_000
PASSWORD = "correct horse battery staple"


class Run:
    def __init__(self, bin_dir, dsn):
        self.bin_dir = bin_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ACLAIM_")}
        self.env["ACLAIM_DSN"] = dsn

    def __call__(self, binary, *args, stdin=None, timeout=60):
        return subprocess.run([os.path.join(self.bin_dir, binary), *args], capture_output=True,
                              text=True, env=self.env, input=stdin, timeout=timeout)


def keys_in_a_planted_folder(c, run, scratch):
    """A folder others can write to: a link named like the key file must not make generate write
    through it (as root it would overwrite and chmod the link's target), nor may a file there be
    overwritten."""
    out = os.path.join(scratch, "shared")
    os.makedirs(out)
    target = os.path.join(scratch, "precious.conf")
    with open(target, "w") as f:
        f.write("do not touch\n")
    os.chmod(target, 0o644)
    os.symlink(target, os.path.join(out, "rev-a.key"))
    r = run("aclaimctl", "keys", "generate", "--name", "rev-a", "--out-dir", out)
    c.check(r.returncode == 2 and os.path.join(out, "rev-a.key") in r.stderr
            and "already exists" in r.stderr,
            "keys generate refuses a planted link, exit 2, naming it", said(r))
    with open(target) as f:
        content = f.read()
    c.check(content == "do not touch\n" and stat.S_IMODE(os.stat(target).st_mode) == 0o644,
            "the link's target is neither written nor chmodded",
            f"{content!r} mode {stat.S_IMODE(os.stat(target).st_mode):o}")
    c.check(not os.path.exists(os.path.join(out, "rev-a.pub")),
            "nothing of the refused pair is written")
    # A dangling link is refused too: creating through it would make the target.
    os.symlink(os.path.join(scratch, "made-by-link"), os.path.join(out, "rev-b.pub"))
    r = run("aclaimctl", "keys", "generate", "rev-b", "--out-dir", out)
    c.check(r.returncode == 2 and "rev-b.pub" in r.stderr
            and not os.path.exists(os.path.join(scratch, "made-by-link"))
            and not os.path.exists(os.path.join(out, "rev-b.key")),
            "a dangling link is refused and the .key it would have paired is removed", said(r))
    # An existing pair is never overwritten: generating twice is a mistake, not a rotation.
    r = run("aclaimctl", "keys", "generate", "rev-c", "--out-dir", out)
    c.check(r.returncode == 0 and len(r.stdout.strip()) == 40, "a fresh name is generated",
            said(r))
    mode = stat.S_IMODE(os.stat(os.path.join(out, "rev-c.key")).st_mode)
    c.check(mode == 0o600, "the secret key is created 0600", f"mode {mode:o}")
    with open(os.path.join(out, "rev-c.key")) as f:
        first = f.read()
    r = run("aclaimctl", "keys", "generate", "rev-c", "--out-dir", out)
    with open(os.path.join(out, "rev-c.key")) as f:
        c.check(r.returncode == 2 and "rev-c.key already exists" in r.stderr and f.read() == first,
                "generating over an existing key is refused and leaves it as it was", said(r))
    r = run("aclaimctl", "keys", "generate", "../escape", "--out-dir", out)
    c.check(r.returncode == 2 and "is not a key name" in r.stderr
            and not os.path.exists(os.path.join(scratch, "escape.key")),
            "a name with '/' cannot leave the folder", said(r))


def deep_json(c, run, scratch):
    line = '{"org": 1, "payload": ' + "[" * DEEP + "]" * DEEP + "}\n"
    r = run("aclaimctl", "enqueue", "--jsonl", "-", stdin=line)
    c.check(r.returncode == 2 and "nested deeper than 128 levels" in r.stderr
            and "<stdin>:1" in r.stderr,
            "enqueue --jsonl refuses a payload nested 100,000 deep, exit 2, naming the line",
            said(r))
    # Within the bound it is an ordinary payload.
    line = '{"org": 1, "payload": ' + "[" * 100 + "]" * 100 + "}\n"
    r = run("aclaimctl", "enqueue", "--jsonl", "-", stdin=line)
    c.check(r.returncode == 0, "a payload nested 100 deep is enqueued", said(r))
    cells = os.path.join(scratch, "cells.json")
    with open(cells, "w") as f:
        f.write("[" * DEEP + "]" * DEEP)
    r = run("aclaimctl", "--cells", cells, "status")
    c.check(r.returncode == 2 and "nested deeper than 128 levels" in r.stderr,
            "a cell map nested 100,000 deep is refused, exit 2", said(r))


class Http:
    def __init__(self, base):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def request(self, path, data=None, headers=None):
        req = urllib.request.Request(self.base + path, data=data, headers=dict(headers or {}))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self.opener.open(req, timeout=10) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")


def console(c, run, dsn):
    r = run("aclaim-console", "--dsn", dsn, "operator", "add", "hostile-test",
            stdin=PASSWORD + "\n")
    if not c.check(r.returncode == 0, "an operator for the console", said(r)):
        return
    p = subprocess.Popen([os.path.join(run.bin_dir, "aclaim-console"), "serve", "--dsn", dsn,
                          "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=run.env)
    try:
        m = re.match(r"console: (http://127\.0\.0\.1:\d+)", p.stdout.readline())
        if not c.check(m is not None, "the console serves"):
            return
        web = Http(m.group(1))
        # A body of 100,000 levels is over the console's 64 KiB body limit, refused 413 before
        # it is read; 30,000 levels (60 KB) reach the parser, which the nesting bound stops.
        status, body = web.request("/api/login", b'{"name": ' + b"[" * DEEP + b"]" * DEEP + b"}")
        c.check(status == 413 and p.poll() is None,
                "a login body nested 100,000 deep (200 KB) is refused 413, the console stays up",
                f"{status} {body[:200]}")
        deep = 30_000
        status, body = web.request("/api/login", b'{"name": ' + b"[" * deep + b"]" * deep + b"}")
        c.check(status == 400 and p.poll() is None,
                "a login body nested 30,000 deep is answered 400 and the console stays up",
                f"{status} {body[:200]}")
        status, body = web.request(
            "/api/login", json.dumps({"name": "hostile-test", "password": PASSWORD}).encode())
        if not c.check(status == 200, "the operator signs in", f"{status} {body[:200]}"):
            return
        status, body = web.request("/api/jobs/99999999999999999999")
        c.check(status == 400 and "is not an id" in body,
                "a job id beyond bigint is answered 400, not 500", f"{status} {body[:200]}")
        status, body = web.request("/api/jobs/99999999999999999999/workflow")
        c.check(status == 400, "its workflow too", f"{status} {body[:200]}")
        status, body = web.request("/api/jobs/9223372036854775807")
        c.check(status == 404, "the largest id is an id: no such job", f"{status} {body[:200]}")
    finally:
        p.terminate()
        p.wait(timeout=30)


def main():
    a = arguments(__doc__, "--bin-dir")
    c = Checks()
    with migrated_database(c, a.bin_dir, f"aclaim_hostile_input_{os.getpid()}") as dsn, \
            tempfile.TemporaryDirectory(prefix="aclaim-hostile-") as scratch:
        run = Run(os.path.abspath(a.bin_dir), dsn)
        keys_in_a_planted_folder(c, run, scratch)
        deep_json(c, run, scratch)
        console(c, run, dsn)
    return c.result()


if __name__ == "__main__":
    sys.exit(main())

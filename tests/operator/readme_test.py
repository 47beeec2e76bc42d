#!/usr/bin/env python3
"""Runs every ```sh block of README.md as written, one after the other in one bash session, the way
a new user follows it: its own throwaway PostgreSQL (`compose/dev db`, as the README says), a
plaintext coordinator and workers left running with `&`, the lifecycle, keys, retention, producer
and consumer-group commands. Fails on the first command that fails (`set -e`), and checks what the
README promises of the output where a wrong answer would still exit 0.

A block is skipped only when the README marks it, on the line before its fence, with
`<!-- readme-test: skip: WHY -->`; each skip is printed with its reason. Nothing in the README is
edited; the test fills these placeholders, each printed as it is filled:

  build/bin/, compose/, clients/python   the suite's binaries and the checkout (the block runs in a
                                         scratch folder, so that keys/ and the like land there)
  /var/lib/aclaim/archive                a scratch folder, holding an archive of job 42's events
                                         (the file the README reads; a fresh database has no
                                         month old enough to archive)
  @host:5432/aclaim                      the host, port and database of the README's ACLAIM_DSN
  ACLAIM_BIND, ACLAIM_CONNECT, ACLAIM_HTTP_BIND   free ports, so that a coordinator elsewhere on
                                         the machine does not answer instead (the README's
                                         defaults are 5555 and its HTTP port)
  python3                                the Python the suite runs (ACLAIM_PYTHON, with pyzmq), first
                                         on PATH, as on the Debian 12 machine the README assumes

A command the README leaves running with `&` must still run when the last block ends: each one's
pid is noted after it starts, and one that has exited fails the test.

  readme_test.py --root . --bin-dir build/bin --build-dir build
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

SKIP = re.compile(r"<!--\s*readme-test:\s*skip:\s*(.*?)\s*-->")


def blocks(readme):
    """[(line number, text, skip reason or None)] of every ```sh block."""
    out = []
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            m = SKIP.search(before)
            out.append((start + 1, "\n".join(lines[start:j]), m.group(1) if m else None))
            i = j
        i += 1
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_archive(path):
    """A valid archive of January 2026 with two events of job 42 (docs/operations.md's format)."""
    header = {"archived_at": "2026-05-02T03:00:00Z", "format": "aclaim-job-events",
              "from": "2026-01-01T00:00:00Z", "partition": "job_events_2026_01",
              "to": "2026-02-01T00:00:00Z", "version": 1}
    events = [
        {"at": "2026-01-05T10:00:00Z", "detail": "queue default", "generation": 0, "id": 10,
         "job_id": 42, "kind": "enqueued", "org_id": 1, "worker": None},
        {"at": "2026-01-05T10:00:02Z", "detail": "", "generation": 1, "id": 11, "job_id": 42,
         "kind": "claimed", "org_id": 1, "worker": "w-1"},
    ]
    body = "".join(json.dumps(x, sort_keys=True, separators=(",", ":")) + "\n"
                   for x in [header, *events])
    trailer = {"end": True, "max_id": 11, "min_id": 10, "rows": 2,
               "sha256": hashlib.sha256(body.encode()).hexdigest()}
    with open(path, "w") as f:
        f.write(body + json.dumps(trailer, sort_keys=True, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = ap.parse_args()
    root, bin_dir = os.path.abspath(a.root), os.path.abspath(a.bin_dir)
    with open(os.path.join(root, "README.md")) as f:
        found = blocks(f.read())
    scratch = tempfile.mkdtemp(prefix="aclaim-readme-")
    # PostgreSQL runs as its own user and starts in the working folder.
    os.chmod(scratch, 0o755)
    archive = os.path.join(scratch, "archive")
    os.makedirs(archive)
    write_archive(os.path.join(archive, "job_events_2026_01.events.jsonl"))
    fills = [("build/bin/", bin_dir + "/"), ("compose/", root + "/compose/"),
             ("clients/python", root + "/clients/python"), ("/var/lib/aclaim/archive", archive),
             ("@host:5432/aclaim", "@${ACLAIM_DSN#*@}")]
    script = ["set -euo pipefail", "PS4='+ README: '", "readme_bg=()", "set -x"]
    ran = 0
    for line, text, skip in found:
        if skip is not None:
            print(f"SKIP: README.md block at line {line}: {skip}")
            continue
        for old, new in fills:
            if old in text:
                print(f"filled: {old} -> {new} (block at line {line})")
                # A relative path only where it starts a word: "compose/dev", not
                # "docker-compose/"; the others wherever they stand.
                guard = r"(?<![\w./-])" if old[0].isalpha() else ""
                text = re.sub(guard + re.escape(old), lambda _: new, text)
        script.append(f": README.md block at line {line}")
        for command in text.splitlines():
            script.append(command)
            # Left running (a lone & before any comment): note its pid, checked at the end.
            if re.search(r"(?<!&)&\s*(#.*)?$", command) and not command.lstrip().startswith("#"):
                script.append('readme_bg+=("$!")')
        ran += 1
    script.append(": every block ran")
    script.append('for p in "${readme_bg[@]}"; do kill -0 "$p" || '
                  '{ echo "README: a command left running with & has ended (pid $p)"; exit 1; }; '
                  'done')
    # No ACLAIM_* of the suite's reaches the README's commands, except how compose/dev builds.
    keep = ("ACLAIM_BUILD_TARGETS", "ACLAIM_CMAKE_ARGS")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLAIM_") or k in keep}
    python = os.path.join(scratch, "python")
    os.makedirs(python)
    os.symlink(sys.executable, os.path.join(python, "python3"))
    print(f"filled: python3 -> {sys.executable}")
    env["PATH"] = python + os.pathsep + env.get("PATH", "")
    port = free_port()
    env.update({"ACLAIM_BUILD_DIR": os.path.abspath(a.build_dir),
                "ACLAIM_BIND": f"tcp://127.0.0.1:{port}",
                "ACLAIM_CONNECT": f"tcp://127.0.0.1:{port}",
                "ACLAIM_HTTP_BIND": f"127.0.0.1:{free_port()}"})
    log_path = os.path.join(scratch, "readme.log")
    print(f"running {ran} blocks of README.md in {scratch} (log: {log_path})", flush=True)
    failed = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=scratch, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            # The coordinator and workers the README left running, and anything else it started.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    with open(log_path) as f:
        out = f.read()
    stop = re.search(r"stop with: compose/pgtmp stop (\S+)", out)
    if stop:
        subprocess.run([os.path.join(root, "compose", "pgtmp"), "stop", stop.group(1)],
                       capture_output=True, timeout=60)

    def check(ok, what):
        print(("PASS: " if ok else "FAIL: ") + what)
        if not ok:
            failed.append(what)

    check(code == 0, f"every block runs to its end (exit {code})")
    check(stop is not None, "compose/dev db said how to stop its PostgreSQL")
    check(re.search(r"^enqueued 100 jobs for organization 1 in 1 transaction: jobs \d+ to \d+",
                    out, re.M) is not None, "enqueue names the jobs it made")
    check(re.search(r"^cancelled 1 of 1 jobs$", out, re.M) is not None,
          "the job enqueued with --ids is the one cancelled")
    check(re.search(r"electrical\s+-$", out, re.M) is not None,
          "keys list shows the key's queue limit")
    check(re.search(r'^\{"at_us":\d+,.*"outcome":"completed"', out, re.M) is not None,
          "results follow --from earliest prints the verdicts already committed")
    check(re.search(r'"job_id":42,"kind":"claimed"', out) is not None,
          "retention read prints job 42's archived events")
    if failed:
        print("--- the run's log, last 80 lines ---")
        print("\n".join(out.splitlines()[-80:]))
    if not a.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{ran} blocks ran, {len(found) - ran} skipped; {len(failed)} checks failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs the conformance kit in the test suite: a fresh database on the suite's PostgreSQL
(ACLAIM_TEST_DSN), a real coordinator on it in plaintext or under CURVE, then the kit against
it. The kit ends by sending the coordinator SIGTERM to check the drain; the coordinator must then
exit 0. Exit status: the kit's, or 1 if the coordinator misbehaved.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))

from suite import free_port, suite_server  # noqa: E402
from sqlapi_support import with_database  # noqa: E402


def sql(dsn, statement):
    env = dict(os.environ, PGOPTIONS="-c client_min_messages=warning")
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", dsn, "-c", statement], check=True,
                   stdout=subprocess.DEVNULL, env=env)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=["plaintext", "curve"], required=True)
    p.add_argument("--bin-dir", required=True, help="where aclaim-coordinator and aclaimctl are")
    args = p.parse_args()
    server = suite_server()
    if not server:
        return 1
    name = f"aclaim_conformance_{args.mode}_{os.getpid()}"
    sql(server, f"DROP DATABASE IF EXISTS {name}")
    sql(server, f"CREATE DATABASE {name}")
    dsn = with_database(server, name)
    work = tempfile.mkdtemp(prefix="aclaim-conformance-")
    log_path = os.path.join(work, "coordinator.log")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    # The HTTP endpoint serves the callback of a parked job (protocol 1.6).
    http = f"127.0.0.1:{free_port()}"
    argv = [os.path.join(args.bin_dir, "aclaim-coordinator"), "--dsn", dsn, "--bind", endpoint,
            "--migrate", "--lease-ms", "1000", "--reap-interval-ms", "100", "--http-bind", http,
            "--key-cache-ms", "200", "--drain-timeout-ms", "5000", "--log-level", "info"]
    kit = [sys.executable, os.path.join(HERE, "aclaim_conformance.py"), "--endpoint", endpoint,
           "--aclaimctl", os.path.join(args.bin_dir, "aclaimctl"), "--dsn", dsn, "--http", http]
    if args.mode == "curve":
        public, secret = zmq.curve_keypair()
        key_file = os.path.join(work, "coordinator.key")
        with open(key_file, "wb") as f:
            f.write(secret + b"\n")
        os.chmod(key_file, 0o600)
        argv += ["--curve-secret-key-file", key_file]
        # The "=" form: a Z85 key may begin with "-", which would read as an option.
        kit += ["--server-key=" + public.decode()]
    else:
        argv.append("--plaintext")
    # The schema first, so that the kit's first statements (registering keys) never race the
    # coordinator's own migration.
    subprocess.run([os.path.join(args.bin_dir, "aclaimctl"), "--dsn", dsn, "migrate"], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    status = 1
    with open(log_path, "wb") as log:
        coordinator = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            kit += ["--coordinator-pid", str(coordinator.pid)]
            status = subprocess.run(kit, timeout=300).returncode
            try:
                code = coordinator.wait(timeout=20)
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                print(f"the coordinator did not exit 0 after the drain (status {code})",
                      file=sys.stderr)
                status = 1
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
                coordinator.wait()
    if status != 0:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = f.readlines()[-40:]
        print("---- coordinator log (tail) ----", file=sys.stderr)
        sys.stderr.write("".join(tail))
    sql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return status


if __name__ == "__main__":
    sys.exit(main())

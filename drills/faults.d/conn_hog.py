#!/usr/bin/python3
"""Holds every connection PostgreSQL will give, for drills/faults' pg_connections scenario.

Opens connections until the server refuses one ("too many clients"), cuts the coordinators'
own sessions (application_name aclaim-coordinator*) and takes the slots they free, until no
coordinator session is left, then holds everything for --hold seconds and lets go. Prints one
JSON line: how many connections it held, how many coordinator sessions it cut, whether the server
was full with none of theirs left, and the refusal PostgreSQL gave. Every step is bounded.
"""
import argparse
import json
import sys
import time

import psycopg2


def fill(dsn, held, deadline):
    """Opens connections until one is refused; returns the refusal's text."""
    while time.monotonic() < deadline:
        try:
            conn = psycopg2.connect(dsn, connect_timeout=5, application_name="aclaim-drill-hog")
        except psycopg2.OperationalError as e:
            return str(e).strip()
        conn.autocommit = True
        held.append(conn)
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--hold", type=float, required=True, help="seconds to hold the server full")
    ap.add_argument("--limit", type=float, default=60, help="seconds to get there")
    args = ap.parse_args()
    deadline = time.monotonic() + args.limit
    held, cut, refusal, theirs = [], 0, "", -1
    try:
        refusal = fill(args.dsn, held, deadline)
        for _ in range(50):
            if not held or time.monotonic() >= deadline:
                break
            cur = held[0].cursor()
            cur.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name LIKE 'aclaim-coordinator%'")
            n = cur.fetchone()[0]
            cut += n
            # A slot is free once its backend has exited: wait for that (bounded), then take
            # the slots before the coordinators' backoff brings them back.
            settle = time.monotonic() + 2
            while True:
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name LIKE 'aclaim-coordinator%'")
                theirs = cur.fetchone()[0]
                if theirs == 0 or time.monotonic() >= settle:
                    break
                time.sleep(0.01)
            again = fill(args.dsn, held, deadline)
            refusal = again or refusal
            if n == 0 and theirs == 0 and again:
                break
        full = bool(refusal) and theirs == 0
        print(json.dumps({"held": len(held), "cut": cut, "full": full,
                          "coordinator_sessions": theirs, "refusal": refusal}), flush=True)
        if full:
            time.sleep(args.hold)
    finally:
        for conn in held:
            conn.close()
    return 0 if full else 1


if __name__ == "__main__":
    sys.exit(main())

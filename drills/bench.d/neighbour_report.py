#!/usr/bin/env python3
"""The neighbour phase's lines of drills/bench's report (report.py imports this), or, run on its
own, those of a neighbour JSON written by drills/bench --neighbour-only.

    neighbour_report.py NEIGHBOUR_JSON"""
import json
import sys

from report_line import line


def _g(d, k):
    return (d or {}).get(k, 0.0) or 0.0


def neighbour_lines(n, line):
    """Prints the figures of the neighbour phase `n` and its target lines through `line` (report.py's
    line(name, value, unit, target, ok, bound))."""
    if not n:
        return
    q, f = n.get("quiet", {}), n.get("flood", {})
    print(f"neighbour: org 1's {n.get('active_workers', 0)} one-job workers, claim p50/p99 "
          f"{_g(q, 'claim_p50_ms'):.2f}/{_g(q, 'claim_p99_ms'):.2f} ms alone ({_g(q, 'claims_per_s'):.0f} claims/s), "
          f"{_g(f, 'claim_p50_ms'):.2f}/{_g(f, 'claim_p99_ms'):.2f} ms beside org 2's flood "
          f"({_g(f, 'claims_per_s'):.0f} claims/s)")
    if n.get("flood_endpoint_shared") is False:
        print("    the flood on a second coordinator (--neighbour-split): same database and cores, "
              "no coordinator shared")
    print(f"    flood: {n.get('flood_welcomed', 0)} of {n.get('flood_sessions', 0)} sessions of max_jobs "
          f"{n.get('flood_max_jobs', 0)} claims, replies {n.get('flood_replies', {})}")
    print(f"    one key's {n.get('idle_sessions_one_key', 0)} sessions: {n.get('idle_welcomed', 0)} welcomed, "
          f"replies {n.get('idle_replies', {})}")
    ratio = _g(n, "p99_ratio")
    line("org 1 claim p99 with the neighbour's flood / without", ratio, "x", "<= 2.0",
         0 < ratio <= 2.0 if q and f else None,
         "organization 1's claims wait behind at most one batch of organization 2 (the "
         "organizations take turns at the DB threads, one thread is left to organization 1 and a "
         "batch of organization 2 asks for at most 100 jobs while organization 1 is active); "
         "what is left is, most likely (not yet measured by stage), the shared PostgreSQL: a "
         "commit can wait behind a WAL flush of organization 2's, and on two cores the flood's clients and PostgreSQL's work for "
         "them share the CPU with organization 1's")
    hello = n.get("new_worker_hello", "")
    line("new org-1 worker's HELLO during the flood", _g(n, "new_worker_hello_ms"), "ms",
         "WELCOME within 5 s", hello == "WELCOME",
         f"answered {hello!r}: the one key's sessions beyond --max-sessions-per-key are refused, "
         "and new keys keep the descriptor reserve (--fd-reserve)")


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        neighbour_lines(json.load(fh), line)

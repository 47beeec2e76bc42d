#!/usr/bin/python3
"""What the coordinator's claims read, from the plans auto_explain logged (ANALYZE, BUFFERS,
FORMAT JSON) in a stretch of PostgreSQL's server log, for drills/faults' backlog scenario.

    claim_plans.py LOG FROM_BYTE TO_BYTE

Takes the plans of claim statements (their text sets state = 'assigned' and reads the candidates
in a CTE named picked) that handed out at least one job, and prints one JSON line: how many there
were, how each read jobs to find its candidates (node type and index, with counts), and the
buffers that search touched (shared hit + read, in the picked CTE) and the whole statement
touched: median, 90th percentile and most, and the whole statement's median per job handed out.
A claim that stays an index probe reads its candidates through the claim-order index and touches
about as many buffers whatever the backlog behind them.
"""
import json
import re
import sys

ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.M)


def buffers(node):
    return node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)


def walk(node):
    yield node
    for child in node.get("Plans", []):
        yield from walk(child)


def claimed_rows(plan):
    """Rows the claim's UPDATE of jobs returned (the jobs it handed out), or None if it has none."""
    for n in walk(plan):
        if (n.get("Node Type"), n.get("Operation"), n.get("Relation Name")) == \
                ("ModifyTable", "Update", "jobs") \
                and n.get("Subplan Name", "").startswith("CTE claimed"):
            return n.get("Actual Rows", 0)
    return None


def candidate_search(plan):
    """The picked CTE: its buffers, and how it read jobs ("Index Scan on jobs_claim_order")."""
    for n in walk(plan):
        if n.get("Subplan Name", "").startswith("CTE picked"):
            reads = sorted({f"{m['Node Type']} on {m.get('Index Name', 'jobs')}" for m in walk(n)
                            if m.get("Relation Name") == "jobs"})
            return buffers(n), reads
    return None, []


def quantile(values, q):
    if not values:
        return 0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    path, begin, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path, "rb") as f:
        f.seek(begin)
        text = f.read(max(0, end - begin)).decode("utf-8", "replace")
    starts = [m.start() for m in ENTRY.finditer(text)] + [len(text)]
    search, total, per_job, reads = [], [], [], {}
    for a, b in zip(starts, starts[1:]):
        entry = text[a:b]
        at = entry.find("plan:")
        if at < 0 or "'assigned'" not in entry or "picked" not in entry:
            continue
        try:
            doc = json.loads(entry[at + len("plan:"):])
        except ValueError:
            continue
        if "state = 'assigned'" not in doc.get("Query Text", ""):
            continue
        plan = doc["Plan"]
        jobs = claimed_rows(plan)
        if not jobs:
            continue
        b_search, how = candidate_search(plan)
        if b_search is None:
            continue
        search.append(b_search)
        total.append(buffers(plan))
        per_job.append(buffers(plan) / jobs)
        for h in how or ["no read of jobs"]:
            reads[h] = reads.get(h, 0) + 1
    print(json.dumps({
        "claims": len(search),
        "reads": reads,
        "search_buffers_median": quantile(search, 0.5),
        "search_buffers_p90": quantile(search, 0.9),
        "search_buffers_max": max(search, default=0),
        "statement_buffers_median": quantile(total, 0.5),
        "statement_buffers_per_job_median": round(quantile(per_job, 0.5), 1),
    }))


if __name__ == "__main__":
    main()

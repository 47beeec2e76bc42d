#!/usr/bin/env python3
"""The report of drills/bench: every step's JSON line, the database snapshots taken around the
runs, and the peers' runs, put together into one JSON file and a printed table, each figure next
to its target (PASS/MISS). A MISS is a measurement, not a failure.

    report.py WORK OUT HOT CURVE PEERS"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from neighbour_report import neighbour_lines  # noqa: E402
from report_line import line  # noqa: E402

work, out, hot, curve, peers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "true", sys.argv[5]


def load(name):
    try:
        with open(f"{work}/{name}.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def g(d, k):
    return (d or {}).get(k, 0.0) or 0.0


def div(a, b):
    return a / b if b else 0.0


steps = ("raw", "floor", "single", "reviewer", "coalesced", "coalesced_held", "latency", "floor_latency", "floor_max", "crowd", "scale", "neighbour")
r = {k: load(k) for k in steps}
if curve:
    r["coalesced_plaintext"] = load("coalesced_plaintext")
peer_runs = ("gw_single8", "gw_single64", "gw_batched", "pgboss")
p = {k: load(k) for k in peer_runs} if peers == "ran" else {}

# ---- write amplification: a phase's WAL and row writes over the jobs it completed ----


def snap(name):
    try:
        with open(f"{work}/{name}.snap") as f:
            return json.loads(f.read().strip())
    except (OSError, ValueError):
        return None


def completed(name):
    try:
        with open(f"{work}/{name}.count") as f:
            before, after = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return 0
    return abs(after - before)


def amplification(name, schema):
    """WAL bytes and row writes (inserts + updates + deletes) per completed job, by table of the
    schema (a partitioned table's rows are its partitions')."""
    a, b, n = snap(f"{name}.before"), snap(f"{name}.after"), completed(name)
    if not a or not b or n == 0:
        return {}
    rows = {}
    for t, y in b["tables"].items():
        if not t.startswith(schema + "."):
            continue
        x = a["tables"].get(t, [0, 0, 0])
        if sum(y) - sum(x) > 0:
            rows[t] = sum(y) - sum(x)
    return {
        "jobs": n,
        "wal_bytes_per_job": (b["lsn"] - a["lsn"]) / n,
        "wal_fpi_per_job": (b.get("fpi", 0) - a.get("fpi", 0)) / n,
        "rows_per_job": {t: v / n for t, v in rows.items()},
        "row_writes_per_job": sum(rows.values()) / n,
    }


amp = {
    "reviewer": amplification("reviewer", "public"),
    "coalesced": amplification("coalesced", "public"),
}
if p:
    amp["gw_single"] = amplification("gw_single8", "graphile_worker")
    amp["gw_batched"] = amplification("gw_batched", "graphile_worker")
    amp["pgboss"] = amplification("pgboss", "pgboss")


# ---- WAL by kind: pg_waldump --stats=record over each phase's WAL ----
# Record types grouped by what wrote them; index entries are B-tree leaf insertions (a posting
# list's too), the entries a row version adds to each index it is in.
WAL_KINDS = (
    ("row writes", ("Heap/INSERT", "Heap/UPDATE", "Heap/HOT_UPDATE", "Heap/DELETE", "Heap2/MULTI_INSERT")),
    ("row locks", ("Heap/LOCK", "Heap2/LOCK_UPDATED")),
    ("index", ("Btree/",)),
    ("commits", ("Transaction/",)),
    ("pruning and vacuum", ("Heap2/PRUNE", "Heap2/VACUUM", "Heap2/FREEZE", "Heap2/VISIBLE", "Heap/INPLACE")),
)


def wal_kinds(name, jobs):
    """Bytes per job by kind (record plus full-page images), index entries per job, and the
    full-page images' share; {} when pg_waldump could not read the phase's WAL."""
    try:
        with open(f"{work}/{name}.wal") as f:
            text = f.read()
    except OSError:
        return {}
    rows = {}
    for l in text.splitlines():
        m = re.match(r"(\S+/\S+)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)", l)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)))
    if not rows or not jobs:
        return {"error": text.strip().splitlines()[-1] if text.strip() else "no WAL statistics"}
    out, seen = {}, set()
    for kind, prefixes in WAL_KINDS:
        members = [t for t in rows if any(t.startswith(pre) for pre in prefixes)]
        seen.update(members)
        out[kind] = sum(rows[t][3] for t in members) / jobs
    out["other"] = sum(v[3] for t, v in rows.items() if t not in seen) / jobs
    return {
        "bytes_per_job": out,
        "total_bytes_per_job": sum(v[3] for v in rows.values()) / jobs,
        "fpi_bytes_per_job": sum(v[2] for v in rows.values()) / jobs,
        "index_entries_per_job": sum(v[0] for t, v in rows.items()
                                     if t in ("Btree/INSERT_LEAF", "Btree/INSERT_POST")) / jobs,
        "records_per_job": sum(v[0] for v in rows.values()) / jobs,
    }


floor = r["floor"]
wal = {
    "coalesced": wal_kinds("coalesced", amp["coalesced"].get("jobs", 0)),
    "floor": wal_kinds("floor", floor.get("jobs", 0)),
}
if p:
    wal["gw_batched"] = wal_kinds("gw_batched", amp.get("gw_batched", {}).get("jobs", 0))

# ---- claim stages from the coordinator's histograms over the latency window ----
BOUNDS_US = (100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
             1000000, 2500000, 5000000)


def histograms(text):
    """stage -> (cumulative bucket counts by bound, count, sum seconds)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r'aclaim_claim_stage_duration_seconds_(bucket|count|sum)\{stage="(\w+)"(?:,le="([^"]+)")?\} (\S+)', line)
        if not m:
            continue
        kind, stage, le, value = m.groups()
        h = out.setdefault(stage, {"buckets": {}, "count": 0, "sum": 0.0})
        if kind == "bucket":
            h["buckets"][le] = float(value)
        elif kind == "count":
            h["count"] = float(value)
        else:
            h["sum"] = float(value)
    return out


def stage_figures(began, ended):
    a, b = histograms(began), histograms(ended)
    figures = {}
    for stage in ("queue_wait", "statement", "commit", "reply"):
        if stage not in b:
            continue
        ha = a.get(stage, {"buckets": {}, "count": 0, "sum": 0.0})
        hb = b[stage]
        n = hb["count"] - ha["count"]
        if n <= 0:
            continue
        mean_ms = (hb["sum"] - ha["sum"]) / n * 1000
        # The 99th percentile from the buckets, interpolated linearly inside its bucket.
        p99_ms, lower, below = 0.0, 0.0, 0.0
        for bound in BOUNDS_US:
            key = f"{bound / 1e6:g}"
            cum = hb["buckets"].get(key, 0) - ha["buckets"].get(key, 0)
            if cum >= 0.99 * n:
                inside = cum - below
                frac = (0.99 * n - below) / inside if inside else 1.0
                p99_ms = (lower + frac * (bound - lower)) / 1000
                break
            lower, below = bound, cum
        else:
            p99_ms = BOUNDS_US[-1] / 1000
        figures[stage] = {"claims": n, "mean_ms": mean_ms, "p99_ms": p99_ms}
    return figures


lat = r["latency"]
stages = stage_figures(lat.get("metrics_began"), lat.get("metrics_ended"))
lat.pop("metrics_began", None)
lat.pop("metrics_ended", None)

try:
    upd, hot_upd = (int(x) for x in hot.split("|"))
except ValueError:
    upd, hot_upd = 0, 0

raw = r["raw"]
res = {
    "curve": curve,
    "raw_single_jobs_per_s": g(raw, "raw_single_jobs_per_s"),
    "raw_batch_jobs_per_s": g(raw, "raw_batch_jobs_per_s"),
    "raw_single_unnotified_jobs_per_s": g(raw, "raw_single_unnotified_jobs_per_s"),
    "raw_single_notifying_jobs_per_s": g(raw, "raw_single_notifying_jobs_per_s"),
    "single_jobs_per_s": g(r["single"], "jobs_per_s"),
    "reviewer_jobs_per_s": g(r["reviewer"], "jobs_per_s"),
    "coalesced_jobs_per_s": g(r["coalesced"], "jobs_per_s"),
    "coalesced_held_jobs_per_s": g(r["coalesced_held"], "jobs_per_s"),
    "claim_p50_ms": g(lat, "claim_p50_ms"),
    "claim_p99_ms": g(lat, "claim_p99_ms"),
    "claim_stages": stages,
    "claim_10k_mean_ms": g(r["scale"], "claim_10k_mean_ms"),
    "claim_1m_mean_ms": g(r["scale"], "claim_1m_mean_ms"),
    "claim_queues_all_mean_ms": g(r["scale"], "claim_queues_all_mean_ms"),
    "claim_queues_one_mean_ms": g(r["scale"], "claim_queues_one_mean_ms"),
    "jobs_n_tup_upd": upd, "jobs_n_tup_hot_upd": hot_upd,
    "write_amplification": amp,
    "wal_by_kind": wal,
    "floor_jobs_per_s": g(floor, "jobs_per_s"),
    "floor_batch": floor.get("batch", 0),
    "floor_claim_p50_ms": g(r["floor_latency"], "claim_p50_ms"),
    "floor_claim_p99_ms": g(r["floor_latency"], "claim_p99_ms"),
}
for k, v in p.items():
    res[f"{k}_jobs_per_s"] = g(v, "jobs_per_s")
gw_single = max(g(p.get("gw_single8"), "jobs_per_s"), g(p.get("gw_single64"), "jobs_per_s")) if p else 0.0
gw_batched = g(p.get("gw_batched"), "jobs_per_s") if p else 0.0
res["single_vs_raw_single_ratio"] = div(res["single_jobs_per_s"], res["raw_single_jobs_per_s"])
res["coalesced_vs_raw_batch_ratio"] = div(res["coalesced_jobs_per_s"], res["raw_batch_jobs_per_s"])
res["coalesced_vs_floor_ratio"] = div(res["coalesced_jobs_per_s"], res["floor_jobs_per_s"])
res["reviewer_vs_graphile_single_ratio"] = div(res["reviewer_jobs_per_s"], gw_single)
res["coalesced_vs_graphile_batched_ratio"] = div(res["coalesced_jobs_per_s"], gw_batched)
res["notify_cost_ratio"] = div(res["raw_single_notifying_jobs_per_s"], res["raw_single_unnotified_jobs_per_s"])
res["claim_1m_vs_10k_ratio"] = div(res["claim_1m_mean_ms"], res["claim_10k_mean_ms"])
res["claim_queues_vs_flat_ratio"] = div(res["claim_queues_all_mean_ms"], res["claim_10k_mean_ms"])
res["claim_one_queue_vs_flat_ratio"] = div(res["claim_queues_one_mean_ms"], res["claim_10k_mean_ms"])
res["hot_update_ratio"] = div(hot_upd, upd)
# The most the coalesced shape could make on these cores if aclaim's statements cost PostgreSQL
# exactly what the floor's do per job, with this run's coordinator and clients beside them: every
# process shares the same two cores, so a job can cost no less than the sum.
# The floor's PostgreSQL CPU per job is the lesser of the coordinator's batch and the shape's
# largest one (512), so the ceiling holds for any batch the coordinator could have run.
_cc = (r["coalesced"] or {}).get("cpu") or {}
_floor_us = [g(f.get("cpu"), "postgres_us_per_job") for f in (floor, r["floor_max"]) if f and f.get("cpu")]
_per_job = (min(_floor_us) if _floor_us else 0) + g(_cc, "coordinator_us_per_job") + g(_cc, "generator_us_per_job")
res["floor_max_jobs_per_s"] = g(r["floor_max"], "jobs_per_s")
res["floor_least_postgres_us_per_job"] = min(_floor_us) if _floor_us else 0.0
res["coalesced_ceiling_jobs_per_s"] = div(g(_cc, "cores") * 1e6, _per_job) if _floor_us and _cc else 0.0
res["coalesced_ceiling_vs_floor_ratio"] = div(res["coalesced_ceiling_jobs_per_s"], res["floor_jobs_per_s"])
res["coalesced_ceiling_vs_graphile_batched_ratio"] = div(res["coalesced_ceiling_jobs_per_s"], gw_batched)
crowd = r["crowd"]
res["crowd"] = crowd
if curve:
    res["coalesced_plaintext_jobs_per_s"] = g(r["coalesced_plaintext"], "jobs_per_s")
    res["coalesced_curve_vs_plaintext_ratio"] = div(res["coalesced_jobs_per_s"], res["coalesced_plaintext_jobs_per_s"])
try:
    with open(f"{work}/reviewer.notifications") as f:
        res["reviewer_result_notifications"] = int(f.read().split()[0])
except (OSError, ValueError, IndexError):
    res["reviewer_result_notifications"] = -1
reviewer_jobs = amp["reviewer"].get("jobs", 0)
res["result_notifications_per_job"] = div(res["reviewer_result_notifications"], reviewer_jobs)
res["details"] = {**r, **({"peers": p} if p else {})}
with open(out, "w") as f:
    json.dump(res, f, indent=2)

# ---- the printed report ----


def storm_wait(rs):
    """The crowd restart's check on the active workers: (longest wait in ms, PASS, what bounds it).
    It passes only on its own numbers: every active worker back while idle workers were still
    reconnecting, claims answered in that stretch, the longest wait in it at most a second, and no
    refusal. Active workers that never all came back, or only after the crowd, were starved of the
    storm, and a missing figure is a miss, never a wait of 0 ms."""
    back_s, all_s = rs.get("seconds_to_active_back"), rs.get("seconds_to_reconnect_all")
    gap, claims = rs.get("longest_gap_after_active_back_ms"), rs.get("claims_after_active_back")
    refusals = rs.get("active_refusals")
    storm_gap = g(rs, "longest_gap_without_assignment_ms")
    if back_s is None or back_s < 0:
        return storm_gap, False, (f"not every active worker came back after the restart: their longest wait over the "
                                  f"storm was {storm_gap:.0f} ms")
    if all_s is None or back_s >= all_s or gap is None or claims is None:
        return storm_gap, False, (f"the active workers were all back only {back_s:.1f} s after SIGTERM, when the idle "
                                  f"crowd was ({g(rs, 'seconds_to_reconnect_all'):.1f} s): no stretch amid the crowd to "
                                  f"measure; their longest wait over the storm was {storm_gap:.0f} ms")
    if claims == 0:
        return gap, False, f"no active worker got a job in the {gap:.0f} ms from their return to the crowd's"
    if refusals != 0:
        return gap, False, f"{refusals} refusals of the active workers' requests: {rs.get('active_refusals_by_reason', {})}"
    return gap, gap <= 1000, "the reconnect storm's handshakes on the coordinator's I/O thread ahead of the active workers' messages"


def cpu(name, d):
    c = (d or {}).get("cpu") or d
    if not c or not isinstance(c, dict) or "postgres_us_per_job" not in c:
        return
    if "worker_us_per_job" in c:  # a peer: its workers and its queue client are one node process
        print(f"    cpu/job {name:<30} node (workers and queue) {c['worker_us_per_job']:7.1f} us, "
              f"PostgreSQL {c['postgres_us_per_job']:7.1f} us; other processes {100 * c.get('other_share', 0):.0f}% of the machine")
        return
    print(f"    cpu/job {name:<30} coordinator {c.get('coordinator_us_per_job', 0):7.1f} us, "
          f"PostgreSQL {c['postgres_us_per_job']:7.1f} us, load generator {c.get('generator_us_per_job', 0):6.1f} us "
          f"({100 * c.get('generator_share', 0):.0f}% of the machine); other processes {100 * c.get('other_share', 0):.0f}%")


print()
print("transport: " + ("CURVE (curve: true): every coordinator connection encrypted, a registered key per client"
                       if curve else "plaintext (curve: false): no encryption, no authentication"))
print(f"raw single (8 threads, 1 claim + 1 completion per txn): {res['raw_single_jobs_per_s']:.0f} jobs/s")
cpu("raw single", raw.get("raw_single_cpu"))
print(f"raw batch (4 threads, 100 + 100 per statement):         {res['raw_batch_jobs_per_s']:.0f} jobs/s")
cpu("raw batch", raw.get("raw_batch_cpu"))
try:
    with open(f"{work}/floor.batch") as f:
        fb, fassigned, fstatements = f.read().split()
except (OSError, ValueError):
    fb, fassigned, fstatements = "?", "?", "?"
print(f"contract's floor (4 clients, batch {floor.get('batch', 0)}: the coalesced run's {fassigned} jobs over "
      f"{fstatements} claim statements; bare tables, completion + next claim per txn, one audit row per "
      f"transition, one verdict row): {res['floor_jobs_per_s']:.0f} jobs/s, WAL {g(floor, 'wal_bytes_per_job'):.0f} B/job, "
      f"rows {g(floor, 'row_writes_per_job'):.2f}/job")
cpu("floor", floor)
print(f"raw single, a pg_notify in every completion vs none (alternating, same run): "
      f"{res['raw_single_notifying_jobs_per_s']:.0f} vs {res['raw_single_unnotified_jobs_per_s']:.0f} jobs/s")
print(f"single, --coalesce off (16 clients, 1 job per claim):   {res['single_jobs_per_s']:.0f} jobs/s")
cpu("single", r["single"])
rv = r["reviewer"]
print(f"reviewer shape (64 workers, 1 job per claim, defaults): {res['reviewer_jobs_per_s']:.0f} jobs/s, "
      f"claim p50 {g(rv, 'claim_p50_ms'):.2f} ms, p99 {g(rv, 'claim_p99_ms'):.2f} ms, {rv.get('jobs_lost', 0)} leases lost")
cpu("reviewer", rv)
print(f"    results notifications on aclaim_results during it: {res['reviewer_result_notifications']} "
      f"for {reviewer_jobs} completed jobs")
c = r["coalesced"]
print(f"coalesced (16 clients, 32 per claim, no-op jobs):       {res['coalesced_jobs_per_s']:.0f} jobs/s, "
      f"{c.get('jobs_lost', 0)} leases lost")
cpu("coalesced", c)
h = r["coalesced_held"]
print(f"coalesced, held 1.2 s (window bound 1707 jobs/s):      {res['coalesced_held_jobs_per_s']:.0f} jobs/s, "
      f"{h.get('renewals', 0)} renewals, {h.get('jobs_lost', 0)} leases lost")
print(f"claim latency at {lat.get('rate_per_s', 0):.0f}/s open loop over {lat.get('sessions', 0)} sessions: p50 {res['claim_p50_ms']:.2f} ms, p99 {res['claim_p99_ms']:.2f} ms "
      f"({lat.get('claims_assigned', 0)} assigned, {lat.get('claims_no_work', 0)} no work, {lat.get('claims_refused', 0)} refused; "
      f"{lat.get('completions_accepted', 0)} completed, {lat.get('completions_refused', 0)} completions refused)")
print(f"    warm-up before that ({lat.get('warmup_seconds', 0):.0f} s, same schedule, not in those figures): {lat.get('warmup_claims_sent', 0)} claims, "
      f"p99 {g(lat, 'warmup_claim_p99_ms'):.2f} ms, {lat.get('warmup_claims_refused', 0)} refused "
      f"{lat.get('warmup_claims_refused_by_code', {}) or ''}")
if stages:
    print("    where a claim's time went (coordinator histograms; p99 interpolated in 100/250/500 us, 1/2.5/5/10 ms buckets):")
    for stage, f in stages.items():
        print(f"      {stage:<11} mean {f['mean_ms']:6.2f} ms  p99 {f['p99_ms']:6.2f} ms")
    known = sum(f["mean_ms"] for f in stages.values())
    print(f"      the rest (client, sockets, CURVE, the router's own queue): mean {max(0.0, g(lat, 'claim_p50_ms') - known):.2f} ms at the median")
cpu("latency (per claim)", lat)
try:
    with open(f"{work}/claim_index.txt") as f:
        rb, fb, ra, fa, claimed = (int(x) for x in f.read().strip().split("|"))
    res["claim_index_entries_read_per_claim"] = div(ra - rb, claimed)
    res["claim_index_dead_entries_per_claim"] = div((ra - rb) - (fa - fb), claimed)
    print(f"    the claim-order index over it: {res['claim_index_entries_read_per_claim']:.2f} entries read per job claimed, "
          f"{res['claim_index_dead_entries_per_claim']:.2f} of them dead (read, no live row behind them) over {claimed} claimed jobs")
except (OSError, ValueError):
    pass
fl = r["floor_latency"]
if fl:
    print(f"contract's floor on the same schedule (2 clients as the DB threads, one durable transaction each for what arrived, "
          f"mean batch {g(fl, 'mean_batch'):.1f}): claim p50 {res['floor_claim_p50_ms']:.2f} ms, p99 {res['floor_claim_p99_ms']:.2f} ms, "
          f"max {g(fl, 'claim_max_ms'):.2f} ms")
    cpu("floor latency (per claim)", fl)
fm = r["floor_max"]
if fm:
    print(f"contract's floor at the coalesced shape's largest batch (512: 16 clients x 32 held): {res['floor_max_jobs_per_s']:.0f} jobs/s, "
          f"WAL {g(fm, 'wal_bytes_per_job'):.0f} B/job")
    cpu("floor, batch 512", fm)
if res["coalesced_ceiling_jobs_per_s"]:
    print(f"coalesced ceiling on these {g((r['coalesced'] or {}).get('cpu'), 'cores'):.0f} cores at the floor's least PostgreSQL CPU per job "
          f"({res['floor_least_postgres_us_per_job']:.1f} us) plus this run's "
          f"coordinator and clients: {res['coalesced_ceiling_jobs_per_s']:.0f} jobs/s = "
          f"{res['coalesced_ceiling_vs_floor_ratio']:.2f} x the floor, {res['coalesced_ceiling_vs_graphile_batched_ratio']:.2f} x graphile-worker batched")
s = r["scale"]
print(f"claim cost: 10k pending {res['claim_10k_mean_ms']:.2f} ms mean (p99 {g(s, 'claim_10k_p99_ms'):.2f}), "
      f"1M pending + 1M completed {res['claim_1m_mean_ms']:.2f} ms mean (p99 {g(s, 'claim_1m_p99_ms'):.2f})")
print(f"claim cost with 20 queues beside 1M jobs scheduled for later: serving all 20 "
      f"{res['claim_queues_all_mean_ms']:.2f} ms mean (p99 {g(s, 'claim_queues_all_p99_ms'):.2f}), serving one "
      f"{res['claim_queues_one_mean_ms']:.2f} ms mean (p99 {g(s, 'claim_queues_one_p99_ms'):.2f})")
print(f"jobs updates: {upd} total, {hot_upd} HOT ({100 * res['hot_update_ratio']:.0f}%)")
if crowd:
    st, rs = crowd.get("steady", {}), crowd.get("restart", {})
    print(f"crowd: {crowd.get('idle_workers', 0)} idle workers connected in {g(crowd, 'seconds_to_connect_all'):.1f} s; coordinator RSS "
          f"{g(crowd, 'coordinator_rss_before_mb'):.1f} MB -> {g(crowd, 'coordinator_rss_connected_mb'):.1f} MB "
          f"({g(crowd, 'rss_per_connection_kb'):.1f} KB per connection; kernel socket buffers, both ends, not in RSS: "
          f"{g(crowd, 'kernel_tcp_kb_per_connection'):.1f} KB)")
    print(f"    {crowd.get('active_workers', 0)} active workers meanwhile: {g(st, 'jobs_per_s'):.0f} jobs/s, claim p50 {g(st, 'claim_p50_ms'):.2f} ms, "
          f"p99 {g(st, 'claim_p99_ms'):.2f} ms")
    cpu("crowd, active workers", st)
    print(f"    restart: every idle worker back on the new coordinator {g(rs, 'seconds_to_reconnect_all'):.1f} s after SIGTERM "
          f"({g(rs, 'seconds_from_new_coordinator_up'):.1f} s after it answered), all back: {rs.get('all_reconnected', False)}; "
          f"active workers meanwhile: {rs.get('claims', 0)} claims, p99 {g(rs, 'claim_p99_ms'):.2f} ms, "
          f"longest stretch without an assignment {g(rs, 'longest_gap_without_assignment_ms'):.0f} ms; "
          + (f"all of them back {g(rs, 'seconds_to_active_back'):.1f} s after SIGTERM, then {rs.get('claims_after_active_back')} claims "
             f"and a longest stretch of {g(rs, 'longest_gap_after_active_back_ms'):.0f} ms while idle workers were still reconnecting; "
             if rs.get("claims_after_active_back") is not None else
             "not all of them back while idle workers were still reconnecting; ") +
          f"{rs.get('active_refusals', 0)} refusals; new coordinator RSS {g(rs, 'coordinator_rss_mb'):.1f} MB")
    back_at = rs.get("sessions_back_at_seconds", {})
    if back_at:
        print("    sessions on the new coordinator after SIGTERM: " +
              ", ".join(f"{int(v)} at {k} s" for k, v in sorted(back_at.items(), key=lambda kv: int(kv[0]))))
if curve:
    ratio = res["coalesced_curve_vs_plaintext_ratio"]
    pl = r["coalesced_plaintext"]
    lost_c, lost_p = c.get("jobs_lost", 0), pl.get("jobs_lost", 0)
    print(f"coalesced, CURVE vs plaintext (same run, fresh organization each): {res['coalesced_jobs_per_s']:.0f} "
          f"({lost_c} leases lost) vs {res['coalesced_plaintext_jobs_per_s']:.0f} jobs/s ({lost_p} leases lost) "
          f"= {ratio:.2f} x")
    if 0 < ratio < 0.9:
        print(f"FINDING: with CURVE the coalesced throughput was {100 * (1 - ratio):.0f}% lower in this run "
              "(every message is encrypted and authenticated on both ends, on the cores the clients, the "
              "coordinator and PostgreSQL share)")
    else:
        print("CURVE cost no visible coalesced throughput in this run (not 10% or more below plaintext)")
    if lost_c or lost_p:
        print("    caution: a run that lost leases measured lapses and reclaims as much as the transport; "
              "compare runs without lost leases, on a quiet machine")
if p:
    print("peers on the same PostgreSQL, same durability (no-op tasks):")
    for k, label in (("gw_single8", "graphile-worker, one job per fetch, concurrency 8"),
                     ("gw_single64", "graphile-worker, one job per fetch, concurrency 64"),
                     ("gw_batched", "graphile-worker, local queue 200, concurrency 16"),
                     ("pgboss", "pg-boss, batch 50, 8 workers, 0.5 s polling")):
        print(f"    {label:<52} {g(p.get(k), 'jobs_per_s'):8.0f} jobs/s")
        cpu(k, p.get(k))
elif peers == "unavailable":
    print("peers: not measured (npm could not install them; see above)")
else:
    print("peers: not measured (drills/bench --peers)")
print("write amplification (WAL bytes and row writes per completed job over the whole phase, after its load's checkpoint):")
for k, a in amp.items():
    if not a:
        continue
    tables = ", ".join(f"{t.split('.')[-1]} {v:.2f}" for t, v in a["rows_per_job"].items())
    print(f"    {k:<12} WAL {a['wal_bytes_per_job']:7.0f} B/job (full-page images {a['wal_fpi_per_job']:.2f}/job), "
          f"rows {a['row_writes_per_job']:.2f}/job ({tables}) over {a['jobs']} jobs")
print("WAL by kind per completed job (pg_waldump --stats=record over the phase; bytes include full-page images):")
for k, w in wal.items():
    if not w:
        continue
    if "error" in w:
        print(f"    {k:<12} not read: {w['error']}")
        continue
    kinds = ", ".join(f"{kind} {v:.0f}" for kind, v in w["bytes_per_job"].items())
    print(f"    {k:<12} {w['total_bytes_per_job']:6.0f} B/job: {kinds}; full-page images {w['fpi_bytes_per_job']:.0f} B; "
          f"index entries {w['index_entries_per_job']:.2f}/job; records {w['records_per_job']:.2f}/job")
print()

peer_ok = (lambda ok: ok) if p else (lambda ok: None)
line("reviewer shape / graphile-worker one-job fetch", res["reviewer_vs_graphile_single_ratio"], "x", ">= 2.0",
     peer_ok(res["reviewer_vs_graphile_single_ratio"] >= 2.0),
     "one durable commit per job (the completion and the next claim, protocol 1.2), batched only as far as "
     "64 workers holding one job each fill a batch while the previous commit flushes, and the CPU a job of "
     "PostgreSQL, the coordinator and the 64 clients on two cores (docs/performance.md)")
line("coalesced / raw batch", res["coalesced_vs_raw_batch_ratio"], "x", ">= 0.85", res["coalesced_vs_raw_batch_ratio"] >= 0.85,
     "PostgreSQL's CPU per job: the coordinator's statements under row security, in batches as large "
     "as what queued during the last commit, on the two cores the clients and the coordinator share "
     "(docs/performance.md has the profile)")
line(f"coalesced / contract's floor at batch {floor.get('batch', 0)}", res["coalesced_vs_floor_ratio"], "x", ">= 0.8",
     res["coalesced_vs_floor_ratio"] >= 0.8 if floor else None,
     "what the coordinator's path adds to the least SQL the contract needs: its indexes (8 entries a job "
     "against 3), the row security and partition routing, and the CPU of the coordinator and clients on "
     f"the same two cores (WAL by kind above); even at the floor's own PostgreSQL CPU per job, this run's "
     f"coordinator and clients leave room for {res['coalesced_ceiling_vs_floor_ratio']:.2f} x (coalesced ceiling above)")
coalesced_wal = amp["coalesced"].get("wal_bytes_per_job", 0)
line("WAL per job, coalesced", coalesced_wal / 1000, "KB", "<= 1.8", 0 < coalesced_wal <= 1800 if amp["coalesced"] else None,
     "row versions and index entries per transition (WAL by kind above)")
line("coalesced / graphile-worker batched", res["coalesced_vs_graphile_batched_ratio"], "x", ">= 1.5",
     peer_ok(res["coalesced_vs_graphile_batched_ratio"] >= 1.5),
     "PostgreSQL's CPU per job: five row writes (two job updates, two events, a verdict) "
     "and their index entries against graphile-worker's two rows (write amplification above); the floor itself "
     f"made {div(res['floor_jobs_per_s'], gw_batched):.2f} x, and at its PostgreSQL CPU per job with this run's "
     f"coordinator and clients on the same cores the ceiling is {res['coalesced_ceiling_vs_graphile_batched_ratio']:.2f} x")
line("single / raw single", res["single_vs_raw_single_ratio"], "x", ">= 0.9", res["single_vs_raw_single_ratio"] >= 0.9,
     "two durable commits per job (claim, then completion) against one in the raw transaction; "
     "each waits for the WAL flush, so the disk's flush rate bounds both (docs/performance.md)")
npj = res["result_notifications_per_job"]
line("aclaim_results notifications per completed job", npj, "", "> 0 and <= 0.5",
     0 < npj <= 0.5 if res["reviewer_result_notifications"] >= 0 else None,
     "one notification per organization per notifier round; rounds as frequent as completions commit")
line("claim p99 at 50% of saturation", res["claim_p99_ms"], "ms", "<= 5", 0 < res["claim_p99_ms"] <= 5,
     "a claim waits for the batch in flight, then its own statement and commit flush "
     f"(stage breakdown above; docs/performance.md); the contract's floor on the same schedule, no coordinator "
     f"and no sockets: p99 {res['floor_claim_p99_ms']:.2f} ms")
for k, d in (("reviewer", rv), ("coalesced", c)):
    cc = d.get("cpu") or {}
    ratio = div(cc.get("coordinator_us_per_job", 0), cc.get("postgres_us_per_job", 0))
    line(f"coordinator / PostgreSQL CPU per job, {k}", ratio, "x", "<= 0.5", (0 < ratio <= 0.5) if cc else None,
         "the coordinator's per-message work (decode, CURVE, session, reply) against the statements it batches")
if crowd:
    st, rs = crowd.get("steady", {}), crowd.get("restart", {})
    line(f"coordinator RSS per idle CURVE connection ({crowd.get('idle_workers', 0)})", g(crowd, "rss_per_connection_kb"), "KB", "<= 64",
         0 < g(crowd, "rss_per_connection_kb") <= 64,
         "libzmq's state per connection: its pipes, the stream engine's batches, the CURVE mechanism")
    line("claim p99, 16 active workers beside the crowd", g(st, "claim_p99_ms"), "ms", "<= 5", 0 < g(st, "claim_p99_ms") <= 5,
         "as in the reviewer run: a claim waits for the batch in flight, then its own statement and "
     "commit, on a coordinator at its defaults (two DB threads)")
    line("every idle worker back after a restart", g(rs, "seconds_to_reconnect_all"), "s", "<= 30",
         bool(rs.get("all_reconnected")) and g(rs, "seconds_to_reconnect_all") <= 30,
         "CURVE handshakes and their key lookups, one ZAP thread, against the workers' backoff")
    gap, ok, why = storm_wait(rs)
    line("active workers' longest wait amid the reconnecting crowd", gap, "ms", "<= 1000, no refusal", ok, why)
    line("active workers' jobs left at the end of the crowd phase", g(crowd, "active_jobs_left"), "jobs", "> 0",
         g(crowd, "active_jobs_left") > 0,
         "the phase's load was smaller than what it claimed: its claims then parked on an empty queue, "
         "and the waits above measure that, not the coordinator")
line("claim cost 1M / 10k", res["claim_1m_vs_10k_ratio"], "x", "<= 1.5", 0 < res["claim_1m_vs_10k_ratio"] <= 1.5,
     "index depth of the partial claim-order index")
line("claim cost, 20 queues + 1M scheduled / flat 10k", res["claim_queues_vs_flat_ratio"], "x", "<= 1.2",
     0 < res["claim_queues_vs_flat_ratio"] <= 1.2,
     "the served-queue filter on the claim-order index and the per-queue room computed per claim")
neighbour_lines(r["neighbour"], line)
print(f"\nwritten to {out}")

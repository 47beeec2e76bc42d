#!/usr/bin/env bash
# drills/bench --capacity: what one primary holds, for docs/scaling.md. On a fresh throwaway
# PostgreSQL with durable commits (fsync on, synchronous_commit on), plaintext, one coordinator:
#   (1) enqueue through aclaimctl (the store's enqueue statement, 1,000 jobs a transaction);
#   (2) claim + completion end to end, one job per transaction (--coalesce off);
#   (3) the same coalesced (no-op jobs), and (4) coalesced with each job held 1.2 s on 3 s leases,
#       so that every job is renewed once.
# Each phase reads pg_current_wal_lsn() and pg_stat_wal before and after, and the jobs it moved
# from the tables, and reports jobs/s and WAL bytes (records, full-page images) per job, and
# pg_walinspect's bytes per record type over the phase (a renewal is one Heap/HOT_UPDATE).
# Usage: capacity.sh BIN_DIR OUT_JSON SECONDS
set -euo pipefail

bin=$1 out=$2 secs=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
for b in aclaim-bench aclaim-coordinator aclaimctl; do
  [ -x "$bin/$b" ] || { echo "capacity: $bin/$b is missing; build first" >&2; exit 2; }
done

work=$(mktemp -d /tmp/aclaim-capacity.XXXXXX)
db=$(mktemp -d /tmp/aclaim-capacity-db.XXXXXX)
coordinator=""
cleanup() {
  [ -n "$coordinator" ] && kill -KILL "$coordinator" 2>/dev/null || true
  wait 2>/dev/null || true
  "$root/compose/pgtmp" stop "$db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

dsn=$("$root/compose/pgtmp" start "$db")
export ACLAIM_DSN=$dsn
q() { psql "$dsn" -qAt -v ON_ERROR_STOP=1 -c "$1"; }
"$bin/aclaimctl" migrate >/dev/null
q "CREATE EXTENSION pg_walinspect" >/dev/null
echo "PostgreSQL $(q 'SHOW server_version'), fsync=$(q 'SHOW fsync'), synchronous_commit=$(q 'SHOW synchronous_commit'), full_page_writes=$(q 'SHOW full_page_writes'), wal_level=$(q 'SHOW wal_level')"
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; data on $(df -T "$db" | awk 'NR==2 {print $2 " (" $1 ")"}')"

# The WAL position (bytes, then as an LSN), records, full-page images and syncs so far, as one
# '|' line.
wal() { q "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, wal_records, wal_fpi, wal_sync, pg_current_wal_lsn() FROM pg_stat_wal"; }
# The record types that wrote the most between two wal() lines, as JSON.
records() {
  q "SELECT coalesce(json_agg(r), '[]') FROM (
       SELECT \"resource_manager/record_type\" AS record, count, combined_size AS bytes
         FROM pg_get_wal_stats('$(cut -d'|' -f5 <<<"$1")', '$(cut -d'|' -f5 <<<"$2")', true)
        WHERE count > 0 ORDER BY combined_size DESC LIMIT 8) r"
}
completed() { q "SELECT count(*) FROM jobs WHERE org_id = $1 AND state = 'completed'"; }
load() {  # load ORG COUNT: pending jobs straight from SQL, flushed out before the measurement
  q "INSERT INTO jobs (org_id, enqueued_at, run_at, payload)
     SELECT $1, now() + g * interval '1 microsecond', now(), 'capacity' FROM generate_series(1, $2) g"
  q "VACUUM ANALYZE jobs"
  q "CHECKPOINT"
  sync
}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_coordinator() {  # start_coordinator ARGS...
  endpoint="tcp://127.0.0.1:$(port)"
  "$bin/aclaim-coordinator" --plaintext --bind "$endpoint" --http-bind "" --log-level warn \
    --db-threads 4 "$@" >"$work/coordinator.log" 2>&1 &
  coordinator=$!
  sleep 1
  kill -0 "$coordinator" 2>/dev/null || { cat "$work/coordinator.log" >&2; exit 1; }
}
stop_coordinator() {
  kill -TERM "$coordinator" 2>/dev/null || true
  wait "$coordinator" 2>/dev/null || true
  coordinator=""
}
record() {  # record NAME JOBS SECONDS BEFORE AFTER [EXTRA_JSON]
  python3 - "$work/$1.json" "$2" "$3" "$4" "$5" "${6:-{\}}" "$(records "$4" "$5")" <<'PY'
import json, sys
path, jobs, secs, before, after, extra, records = sys.argv[1:8]
b = [int(x) for x in before.split("|")[:4]]
a = [int(x) for x in after.split("|")[:4]]
jobs, secs = int(jobs), float(secs)
r = {"jobs": jobs, "seconds": secs, "wal_bytes": a[0] - b[0], "wal_records": a[1] - b[1],
     "wal_fpi": a[2] - b[2], "wal_syncs": a[3] - b[3]}
r.update(json.loads(extra))
r["records"] = json.loads(records)
r.setdefault("jobs_per_s", jobs / secs if secs else 0)
for k in ("wal_bytes", "wal_records", "wal_fpi"):
    r[k + "_per_job"] = r[k] / jobs if jobs else 0
r["jobs_per_sync"] = jobs / r["wal_syncs"] if r["wal_syncs"] else 0
json.dump(r, open(path, "w"))
PY
}
e2e_phase() {  # e2e_phase NAME ORG COORDINATOR_ARGS -- BENCH_ARGS
  local name=$1 org=$2; shift 2
  local cargs=()
  while [ "$1" != -- ]; do cargs+=("$1"); shift; done
  shift
  start_coordinator "${cargs[@]}"
  local before after done0 done1
  done0=$(completed "$org"); before=$(wal)
  "$bin/aclaim-bench" e2e --endpoint "$endpoint" --org "$org" --seconds "$secs" --plaintext "$@" \
    >"$work/$name.out" 2>"$work/$name.err" || { tail -3 "$work/$name.err" >&2; exit 1; }
  after=$(wal); done1=$(completed "$org")
  stop_coordinator
  record "$name" $((done1 - done0)) "$secs" "$before" "$after" "$(tail -n 1 "$work/$name.out")"
}

echo "== (1) enqueue: aclaimctl enqueue --count, 1,000 jobs a transaction"
enqueue_jobs=50000
before=$(wal); t0=$(date +%s.%N)
"$bin/aclaimctl" enqueue --org 1 --count "$enqueue_jobs" >/dev/null
t1=$(date +%s.%N); after=$(wal)
record enqueue "$enqueue_jobs" "$(python3 -c "print($t1 - $t0)")" "$before" "$after"

echo "== (2) claim + completion, one job per transaction (--coalesce off, 16 clients)"
load 2 100000
e2e_phase single 2 --coalesce off -- --clients 16 --max-jobs 1 --capacity 4

echo "== (3) coalesced, no-op jobs (16 clients, 32 per claim)"
load 3 400000
e2e_phase coalesced 3 --coalesce on -- --clients 16 --max-jobs 32 --capacity 128 --hold-ms 0

echo "== (4) coalesced, each job held 1.2 s on a 3 s lease and renewed once"
load 4 100000
e2e_phase held 4 --coalesce on --lease-ms 3000 -- --clients 16 --max-jobs 32 --capacity 128 \
  --hold-ms 1200

mkdir -p "$(dirname "$out")"
python3 - "$work" "$out" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
work, out, cores, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = {k: json.load(open(f"{work}/{k}.json")) for k in ("enqueue", "single", "coalesced", "held")}
r["cores"] = cores
r["load_average_at_end"] = load
json.dump(r, open(out, "w"), indent=2)
print()
print(f"{'phase':<40} {'jobs/s':>9} {'WAL B/job':>10} {'records/job':>12} {'FPI/job':>8} {'jobs/sync':>10}")
names = {"enqueue": "enqueue (1,000 per transaction)",
         "single": "claim + complete, 1 job per txn",
         "coalesced": "claim + complete, coalesced",
         "held": "coalesced, held 1.2 s, 1 renewal each"}
for k, label in names.items():
    p = r[k]
    print(f"{label:<40} {p['jobs_per_s']:>9.0f} {p['wal_bytes_per_job']:>10.0f} "
          f"{p['wal_records_per_job']:>12.1f} {p['wal_fpi_per_job']:>8.2f} {p['jobs_per_sync']:>10.1f}")
print()
for k, label in names.items():
    top = ", ".join(f"{x['record']} {x['bytes'] / max(1, r[k]['jobs']):.0f}" for x in r[k]["records"][:5])
    print(f"{k:<10} bytes per job by record type: {top}")
life = r["enqueue"]["wal_bytes_per_job"] + r["coalesced"]["wal_bytes_per_job"]
held = r["held"]
hot = sum(x["bytes"] for x in held["records"] if x["record"] == "Heap/HOT_UPDATE")
renewals = held.get("renewals", 0)
r["renewal_wal_bytes"] = hot / renewals if renewals else 0
json.dump(r, open(out, "w"), indent=2)
print(f"\na job's life (enqueue + coalesced claim and completion): {life:.0f} WAL bytes; "
      f"one renewal (a Heap/HOT_UPDATE record) adds {r['renewal_wal_bytes']:.0f} "
      f"({renewals} renewals in the held phase)")
print(f"load average at the end: {load} on {cores} cores")
print(f"written to {out}")
PY

# shellcheck shell=bash disable=SC2154,SC2034
# Exhaustion scenarios of drills/faults, sourced by it: a resource PostgreSQL needs runs out under
# load and comes back. Each ends with scenario_end (aclaimctl check, nothing lost, every worker's
# verdict against job_events), as every fault scenario does. What the coordinator and the workers
# do meanwhile is in drills/RUNBOOK.md ("Exhaustion").

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# ---- PostgreSQL at max_connections -----------------------------------------------------------
scenario_pg_connections() {
  local jobs=$((2000 * scale)) hold_s=8
  scenario_begin pg_connections "every connection slot taken while $jobs jobs drain; the coordinator's own sessions cut, held full for $hold_s s, then let go"
  enqueue 1 "$jobs" 50
  local port i
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  start_workers "$port" 4 --concurrency 8 --review-ms 100 --review-dist lognormal
  wait_for "$drain_s" progressed 200 || true
  local before_done report rc=0
  before_done=$(completed)
  # Nothing here may ask the database while it is full: the drill waits on the hog alone.
  report=$(timeout -k 5 $((hold_s + 90)) /usr/bin/python3 "$lib/conn_hog.py" --dsn "$dsn" --hold "$hold_s") || rc=$?
  echo "$report" >"$sdir/hog.json"
  local full held cut refusal
  read -r full held cut refusal < <("$py" -c '
import json, sys
d = json.loads(sys.argv[1] or "{}")
print(d.get("full", False), d.get("held", 0), d.get("cut", 0), " ".join(d.get("refusal", "").split()))
' "$report" 2>/dev/null || echo "False 0 0 unreadable")
  local refused
  refused=$(log_count coordinator "too many clients")
  if [ "$rc" = 0 ] && [ "$full" = True ] && [ "$refused" -ge 1 ]; then
    pass "pg_connections: PostgreSQL full for $hold_s s ($held connections held, $cut coordinator sessions cut, '$refusal'); the coordinator was refused $refused times and kept serving answers"
  else
    fail "pg_connections: server full" "hog exit $rc, full=$full, held $held, cut $cut, coordinator refusals logged $refused"
  fi
  local restored=0
  wait_for 60 at_least 1 log_count coordinator "database connection restored" && restored=1
  wait_for "$drain_s" is_drained || true
  local after_done
  after_done=$(completed)
  if [ "$restored" = 1 ] && [ "$after_done" -gt "$before_done" ]; then
    pass "pg_connections: the coordinator reconnected unaided once slots were free; $((after_done - before_done)) more jobs completed"
  else
    fail "pg_connections: service resumes" "reconnected=$restored, completed $before_done before and $after_done after"
  fi
  scenario_end
}

# ---- the disk under pg_wal full ----------------------------------------------------------------
# A server of its own whose pg_wal lives on a small tmpfs. A ballast file fills the tmpfs, WAL
# switches make PostgreSQL need a new segment, it cannot write one and stops (PANIC); the ballast is
# removed and the server started again, as its supervisor would; nothing acknowledged may be lost.
wal_mount=""
wal_pgdir=""
exhaustion_cleanup() {
  if [ -n "$wal_pgdir" ] && [ -d "$wal_pgdir/data" ]; then
    as_postgres "$pgbin/pg_ctl" -D "$wal_pgdir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ -n "$wal_mount" ] && mountpoint -q "$wal_mount"; then umount "$wal_mount" || true; fi
  [ -z "$wal_mount" ] || rmdir "$wal_mount" 2>/dev/null || true
  [ -z "$wal_pgdir" ] || rm -rf "$wal_pgdir"
}
wal_pg_running() { as_postgres "$pgbin/pg_ctl" -D "$wal_pgdir/data" status >/dev/null 2>&1; }
wal_pg_down() { ! wal_pg_running; }

scenario_wal_disk_full() {
  if [ "$(id -u)" != 0 ]; then
    echo "SKIP wal_disk_full: mounting the small tmpfs under pg_wal needs root"
    return
  fi
  local jobs=$((3000 * scale)) t0
  wal_pgdir=$(mktemp -d -t aclaim-faults-walpg.XXXXXX)
  wal_mount="$wal_pgdir.wal"
  mkdir -p "$wal_mount"
  local wal_dsn
  wal_dsn=$(timeout -k 5 120 "$root/compose/pgtmp" start "$wal_pgdir" 2>"$work/walpg.err") ||
    { fail "wal_disk_full: a server of its own" "$(tail -3 "$work/walpg.err")"; return; }
  as_postgres "$pgbin/pg_ctl" -D "$wal_pgdir/data" -m fast -w stop >/dev/null
  mount -t tmpfs -o size=128M tmpfs "$wal_mount"
  chown postgres: "$wal_mount"
  cp -a "$wal_pgdir/data/pg_wal/." "$wal_mount/"
  rm -rf "$wal_pgdir/data/pg_wal"
  ln -s "$wal_mount" "$wal_pgdir/data/pg_wal"
  echo "max_wal_size = 64MB" >>"$wal_pgdir/data/postgresql.conf"
  echo "min_wal_size = 32MB" >>"$wal_pgdir/data/postgresql.conf"
  as_postgres "$pgbin/pg_ctl" -D "$wal_pgdir/data" -l "$wal_pgdir/data/server.log" -w -t 60 start >/dev/null

  local saved_base=$base_dsn
  base_dsn=$wal_dsn
  scenario_begin wal_disk_full "pg_wal on a 128 MB tmpfs filled while $jobs jobs drain: PostgreSQL stops, the space is freed, it is started again"
  base_dsn=$saved_base
  enqueue 1 "$jobs" 50
  local port i
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; exhaustion_cleanup; return; }
  start_workers "$port" 4 --concurrency 8 --review-ms 100 --review-dist lognormal
  wait_for "$drain_s" progressed 300 || true
  local before_done
  before_done=$(completed)
  t0=$SECONDS
  # The ballast takes every free byte; then each WAL switch needs a segment there is no room for.
  dd if=/dev/zero of="$wal_mount/ballast" bs=1M status=none 2>/dev/null || true
  for i in $(seq 30); do
    wal_pg_running || break
    q "SELECT pg_switch_wal()" >/dev/null 2>&1 || true
    sleep 0.2
  done
  local stopped=0 enospc
  wait_for 60 wal_pg_down && stopped=1
  enospc=$(grep -c "No space left on device" "$wal_pgdir/data/server.log" || true)
  local lost_conn
  wait_for 30 at_least 1 log_count coordinator "database connection lost\|cannot connect to the database" || true
  lost_conn=$(log_count coordinator "database connection lost\|cannot connect to the database")
  if [ "$stopped" = 1 ] && [ "$enospc" -ge 1 ] && [ "$lost_conn" -ge 1 ]; then
    pass "wal_disk_full: PostgreSQL stopped $((SECONDS - t0)) s after the disk filled ($enospc 'No space left on device' in its log); the coordinator saw the database go ($lost_conn log lines)"
  else
    fail "wal_disk_full: the disk fills" "server stopped=$stopped, ENOSPC lines $enospc, coordinator lines $lost_conn"
  fi
  # Five seconds of outage with the workers still asking, then the space comes back.
  sleep 5
  rm -f "$wal_mount/ballast"
  local restarted=0
  as_postgres "$pgbin/pg_ctl" -D "$wal_pgdir/data" -l "$wal_pgdir/data/server.log" -w -t 120 start >/dev/null 2>&1 &&
    restarted=1
  local restored=0
  wait_for 60 at_least 1 log_count coordinator "database connection restored" && restored=1
  wait_for "$drain_s" is_drained || true
  local after_done
  after_done=$(completed)
  if [ "$restarted" = 1 ] && [ "$restored" = 1 ] && [ "$after_done" -gt "$before_done" ]; then
    pass "wal_disk_full: with the space back PostgreSQL recovered and the coordinator reconnected unaided; $((after_done - before_done)) more jobs completed"
  else
    fail "wal_disk_full: service resumes" "restarted=$restarted, reconnected=$restored, completed $before_done before and $after_done after"
  fi
  scenario_end
  exhaustion_cleanup
  wal_pgdir=""
  wal_mount=""
}

# start_crowd PORT ORG N: N idle workers of ORG (aclaim-bench crowd-idle, one process) connect to
# the coordinator at PORT, with CURVE keys of their own when the drill runs with CURVE; its output
# ("ready N SECONDS" once every one had its WELCOME) goes to crowd.log.
start_crowd() {
  local -a args=(--endpoint "tcp://127.0.0.1:$1" --org "$2" --count "$3")
  if $curve_on; then
    args+=("--curve-server-key=$curve_server_pub" --dsn "$dsn")
  else
    args+=(--plaintext)
  fi
  "$bin/aclaim-bench" crowd-idle "${args[@]}" >"$sdir/crowd.log" 2>&1 &
  remember crowd $!
}

# ---- the coordinator at its descriptor limit -----------------------------------------------------
# A coordinator whose descriptor limit (soft and hard) is 256, four working reviewers, then a crowd
# of 400 idle workers (aclaim-bench crowd-idle) that tries to connect: more connections than the
# coordinator has descriptors for. It must keep serving the reviewers it has, and take a new one
# once the crowd has gone.
scenario_fd_limit() {
  local jobs=$((1500 * scale)) limit=256 crowd_n=400
  scenario_begin fd_limit "a coordinator limited to $limit descriptors, 4 reviewers draining $jobs jobs, then $crowd_n idle workers connecting at once"
  enqueue 1 "$jobs" 50
  local port i
  port=$(free_port)
  coordinator_prefix=(prlimit "--nofile=$limit:$limit" --)
  start_coordinator coordinator "$port"
  local started=$?
  coordinator_prefix=()
  [ "$started" = 0 ] || { scenario_end; return; }
  start_workers "$port" 4 --concurrency 4 --review-ms 100 --review-dist lognormal
  wait_for "$drain_s" progressed 100 || true
  start_crowd "$port" 1 "$crowd_n"
  local before_done
  before_done=$(completed)
  # The crowd has had its time to take every descriptor, and the reviewers go on meanwhile.
  local open_fds=0 t
  for t in $(seq 100); do
    open_fds=$(find "/proc/${pid_of[coordinator]}/fd" -mindepth 1 2>/dev/null | wc -l)
    [ "$open_fds" -ge $((limit - 8)) ] && break
    sleep 0.1
  done
  sleep 3
  local during
  during=$(completed)
  local alive=0 warned
  kill -0 "${pid_of[coordinator]}" 2>/dev/null && alive=1
  wait_for 15 at_least 1 log_count coordinator "cannot accept worker connections" || true
  warned=$(log_count coordinator "cannot accept worker connections")
  if [ "$alive" = 1 ] && [ "$open_fds" -ge $((limit - 8)) ] && [ "$during" -gt "$before_done" ] &&
    [ "$warned" -ge 1 ]; then
    pass "fd_limit: the coordinator ran at its limit ($open_fds of $limit descriptors open), said so ('$(grep -h -m1 -o "cannot accept worker connections: [^(]*" "$sdir"/coordinator.*.log)') and kept serving: $((during - before_done)) jobs completed meanwhile"
  else
    fail "fd_limit: serving at the limit" "alive=$alive, $open_fds of $limit descriptors open, completed $before_done then $during, $warned warnings of failed accepts"
  fi
  stop_one crowd
  wait_for "$drain_s" is_drained || true
  # Descriptors back: a new reviewer gets a session.
  start_worker "o1-late" 1 "$port" --concurrency 1 --review-ms 10
  local opened=0
  wait_for 30 at_least 1 log_count coordinator "session org=1 worker=o1-late opened" && opened=1
  if [ "$opened" = 1 ] && kill -0 "${pid_of[coordinator]}" 2>/dev/null; then
    pass "fd_limit: once the crowd left, a new reviewer got a session from the same coordinator"
  else
    fail "fd_limit: service after the crowd" "new session opened=$opened"
  fi
  scenario_end
}

# ---- a backlog of pending jobs with thousands of connected workers -------------------------------
# ACLAIM_BACKLOG_JOBS pending jobs (default 100,000; --minutes: a million), 2,000 idle CURVE workers
# of another organization long-polling on the same coordinator, and four reviewers working through
# the backlog: first for 10 s with a tenth of it enqueued, then for 10 s more once the rest is in.
# The claim must stay an index probe however deep the backlog: PostgreSQL's auto_explain logs a
# sample of the coordinator's statements with their buffers, and every sampled claim must read its
# candidates through jobs_claim_order, touching about as many buffers at the full backlog as at a
# tenth of it. The coordinator's memory must grow with sessions, not with the backlog: its RSS
# after the crowd connected, at a tenth and at the full backlog. And the crowd must not starve the
# reviewers. The backlog stays: the scenario checks what was done, not a drain.
backlog_enqueue() {  # backlog_enqueue COUNT: COUNT jobs in the first queue, bounded
  # Not ctl: its 60 s bound is for single statements, and a million rows take minutes.
  timeout -k 5 1200 "$bin/aclaimctl" --dsn "$dsn" enqueue --org 1 --count "$1" --max-attempts 50 \
    --queue "${fault_queues[0]}" --new-queue --batch 10000 >/dev/null 2>>"$sdir/enqueue.err"
}
rss_kb_of() { awk '/^VmRSS/ {print $2}' "/proc/${pid_of[$1]}/status" 2>/dev/null || echo 0; }
log_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

scenario_backlog() {
  local backlog=${ACLAIM_BACKLOG_JOBS:-$((scale == 1 ? 100000 : 1000000))} crowd_n=2000 work_s=10
  local first=$((backlog / 10))
  scenario_begin backlog "$first then $backlog pending jobs, $crowd_n idle workers of another organization connected, 4 reviewers working for $work_s s at each"
  backlog_ok=true
  local server_log="$pgdir/data/server.log"
  if [ -z "$pgdir" ] || [ ! -r "$server_log" ]; then
    fail "backlog: PostgreSQL's log" "$server_log cannot be read: the claims' plans are read from it"
    scenario_end
    return
  fi
  # The coordinator's sessions (and every other on this scenario's database) log a tenth of their
  # statements' plans with the buffers they touched; timing off, so that sampling costs little.
  local db
  db=$(q "SELECT current_database()")
  q "ALTER DATABASE $db SET session_preload_libraries = 'auto_explain'" >/dev/null
  q "ALTER DATABASE $db SET auto_explain.log_min_duration = 0" >/dev/null
  q "ALTER DATABASE $db SET auto_explain.log_analyze = on" >/dev/null
  q "ALTER DATABASE $db SET auto_explain.log_buffers = on" >/dev/null
  q "ALTER DATABASE $db SET auto_explain.log_timing = off" >/dev/null
  q "ALTER DATABASE $db SET auto_explain.log_format = json" >/dev/null
  q "ALTER DATABASE $db SET auto_explain.sample_rate = 0.1" >/dev/null
  local t0=$SECONDS
  backlog_enqueue "$first" ||
    { fail "backlog: enqueue" "aclaimctl enqueue failed: $(tail -2 "$sdir/enqueue.err")"; scenario_end; return; }
  local enqueue_s=$((SECONDS - t0))
  local port
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  sleep 1
  local rss_alone rss_crowd
  rss_alone=$(rss_kb_of coordinator)
  start_crowd "$port" 2 "$crowd_n"
  local ready=0
  wait_for 120 grep -q "^ready" "$sdir/crowd.log" && ready=1
  # What the sessions cost, before any reviewer: the crowd's claims have been parked a moment.
  sleep 2
  rss_crowd=$(rss_kb_of coordinator)
  # ---- a tenth of the backlog, then the whole of it ----
  # Each stretch starts from a vacuumed table, so that the two differ by the backlog alone: the
  # entries the claims leave dead at the head of jobs_claim_order until a vacuum are read by every
  # later claim, whatever the backlog (drills/RUNBOOK.md, "A deep backlog"). The reviewers are
  # stopped while the rest is enqueued, so that the second stretch starts at the whole backlog.
  local stretch name i before mark
  local -a done_n=() pending_at=() plans=() rss=()
  for stretch in 0 1; do
    if [ "$stretch" = 1 ]; then
      t0=$SECONDS
      backlog_enqueue $((backlog - first)) ||
        { fail "backlog: enqueue" "aclaimctl enqueue failed: $(tail -2 "$sdir/enqueue.err")"; scenario_end; return; }
      enqueue_s=$((enqueue_s + SECONDS - t0))
    fi
    q "VACUUM jobs" >/dev/null
    pending_at[stretch]=$(q "SELECT count(*) FROM jobs WHERE org_id = 1 AND state = 'pending'")
    for i in 1 2 3 4; do
      start_worker "o1-w$stretch$i" 1 "$port" --concurrency 2 --review-ms 20 --review-dist lognormal
    done
    before=$(completed)
    mark=$(log_size "$server_log")
    sleep "$work_s"
    done_n[stretch]=$(($(completed) - before))
    plans[stretch]=$("$py" "$lib/claim_plans.py" "$server_log" "$mark" "$(log_size "$server_log")")
    rss[stretch]=$(rss_kb_of coordinator)
    for i in 1 2 3 4; do stop_one "o1-w$stretch$i"; done
    pending_at[stretch]="${pending_at[stretch]} to $(q "SELECT count(*) FROM jobs WHERE org_id = 1 AND state = 'pending'")"
  done
  local sessions
  sessions=$(log_count coordinator "session org=2 worker=")
  if [ "$ready" = 1 ] && [ "${done_n[0]}" -ge $((work_s * 20)) ] && [ "${done_n[1]}" -ge $((work_s * 20)) ]; then
    pass "backlog: $backlog jobs enqueued in $enqueue_s s; with $sessions idle sessions of another organization connected, 4 reviewers completed ${done_n[0]} jobs in $work_s s at ${pending_at[0]} pending and ${done_n[1]} at ${pending_at[1]}"
  else
    fail "backlog: reviewers served behind the crowd" "crowd ready=$ready ($(tail -2 "$sdir/crowd.log" | tr '\n' ' ')), ${done_n[0]} and ${done_n[1]} jobs completed in $work_s s each"
  fi
  # The claim: sampled plans at each backlog, each an index probe of jobs_claim_order, and the
  # buffers it touched to find its candidates not growing with the backlog (median, at most 1.5 x
  # and 8 buffers more).
  local verdict
  verdict=$("$py" - "${plans[0]}" "${plans[1]}" "${pending_at[0]}" "${pending_at[1]}" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1] or "{}"), json.loads(sys.argv[2] or "{}")
probe = "Index Scan on jobs_claim_order"
def index_only(p):
    return p.get("claims", 0) >= 5 and set(p.get("reads", {})) == {probe}
ok = index_only(a) and index_only(b) and \
    b["search_buffers_median"] <= 1.5 * a["search_buffers_median"] + 8
def say(p, n):
    return (f"{p.get('claims', 0)} sampled claims at {n} pending read jobs by {p.get('reads', {})}, "
            f"finding their candidates in {p.get('search_buffers_median', 0)} buffers (median; "
            f"p90 {p.get('search_buffers_p90', 0)}, most {p.get('search_buffers_max', 0)}), the whole "
            f"statement {p.get('statement_buffers_per_job_median', 0)} buffers per job handed out")
print("ok" if ok else "no", say(a, sys.argv[3]) + "; " + say(b, sys.argv[4]))
PY
)
  if [ "${verdict%% *}" = ok ]; then
    pass "backlog: the claim stays an index probe: ${verdict#* }"
  else
    fail "backlog: the claim stays an index probe" "${verdict#* }"
  fi
  # Memory: what the whole backlog added over a tenth of it stays within 4 MB and 16 bytes per job
  # added, and below a quarter of what the sessions added: a coordinator that kept as little as 64
  # bytes per pending job would not.
  local by_sessions=$((rss_crowd - rss_alone)) by_backlog=$((rss[1] - rss[0]))
  local bound=$((4096 + (backlog - first) * 16 / 1024))
  local figures="RSS $((rss_alone / 1024)) MB alone, $((rss_crowd / 1024)) MB with $crowd_n idle sessions (+$((by_sessions / 1024)) MB), $((rss[0] / 1024)) MB after the stretch at ${pending_at[0]} pending, $((rss[1] / 1024)) MB after the one at ${pending_at[1]} (+$by_backlog KB, bound $bound KB)"
  if [ "$rss_alone" -gt 0 ] && [ "${rss[1]}" -gt 0 ] && [ "$by_backlog" -le "$bound" ] &&
    [ $((by_backlog * 4)) -lt "$by_sessions" ]; then
    pass "backlog: coordinator memory grows with sessions, not with the backlog: $figures"
  else
    fail "backlog: coordinator memory grows with sessions, not with the backlog" "$figures"
  fi
  stop_one crowd
  scenario_end
}

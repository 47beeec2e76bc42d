# shellcheck shell=bash disable=SC2154,SC2034
# Helpers of drills/faults and drills/failover, sourced by them: PASS/FAIL bookkeeping, the
# processes a scenario starts, a fresh database per scenario, bounded waits on observed state, and
# the end of every scenario (stop everything, aclaimctl check, the summary line, the result-file
# cross-check). Expects root, bin, shared, py, pgbin, work, lease_ms, heartbeat_ms and base_dsn
# (or dsn) from the drill, pgdir when the drill runs a throwaway PostgreSQL, and
# drills/shared/curve.sh sourced and set up (curve_coordinator_args, curve_worker).

passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
summary() { echo "$passed passed, $failed failed"; summarized=true; }

# ---- processes ---------------------------------------------------------------------------------
# Every process a scenario starts is a direct child of this shell, registered by name, so that it
# can be signalled (SIGKILL, SIGSTOP) precisely and is always stopped by stop_all or the trap.
declare -A pid_of=()

stop_one() {  # stop_one NAME: SIGTERM (after SIGCONT, in case it is stopped), then SIGKILL
  local name=$1 pid=${pid_of[$1]:-}
  [ -n "$pid" ] || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "pid_of[$name]"
}

kill_one() {  # kill_one NAME: SIGKILL and reap, no grace
  local name=$1 pid=${pid_of[$1]:-}
  [ -n "$pid" ] || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "pid_of[$name]"
}

signal_one() { kill -"$2" "${pid_of[$1]}"; }

# Every pid goes to a file too, for the watchdog: if this shell is killed outright (SIGKILL, so
# no trap runs), the watchdog stops what it started and its PostgreSQL.
remember() {
  pid_of[$1]=$2
  echo "$2" >>"$work/pids"
}
watchdog() {  # watchdog DRILL_PID, in the background
  while kill -0 "$1" 2>/dev/null; do sleep 1; done
  local pid
  while read -r pid; do
    # Only processes that are still ours: a recycled pid runs something else.
    grep -qa -e "$bin/" -e "relay.py" "/proc/$pid/cmdline" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done <"$work/pids"
  [ -z "${pgdir:-}" ] || "$root/compose/pgtmp" stop "$pgdir" >/dev/null 2>&1
}

# Workers first (they release what they hold), then coordinators, then the relay.
stop_all() {
  local name
  for name in "${!pid_of[@]}"; do [[ $name = o* ]] && stop_one "$name"; done
  for name in "${!pid_of[@]}"; do [[ $name = coordinator* ]] && stop_one "$name"; done
  for name in "${!pid_of[@]}"; do stop_one "$name"; done
}

free_port() {
  "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_coordinator NAME PORT [flags...]: each start logs to its own file; waits until serving.
# coordinator_prefix (an array, empty unless a scenario sets it) runs before the binary, e.g.
# prlimit with a lower descriptor limit; it must exec the coordinator, so that its pid is kept.
start_coordinator() {
  local name=$1 port=$2
  shift 2
  local n=$(( ${starts_of[$name]:-0} + 1 ))
  starts_of[$name]=$n
  local log="$sdir/$name.$n.log"
  ${coordinator_prefix[@]+"${coordinator_prefix[@]}"} "$bin/aclaim-coordinator" --dsn "$dsn" --bind "tcp://127.0.0.1:$port" "${curve_coordinator_args[@]}" \
    --lease-ms "$lease_ms" --heartbeat-ms "$heartbeat_ms" --reap-interval-ms 100 \
    --db-threads 2 --in-doubt-budget-ms 10000 --log-level info "$@" >"$log" 2>&1 &
  remember "$name" $!
  local _
  for _ in $(seq 200); do
    grep -q "serving on" "$log" 2>/dev/null && return 0
    kill -0 "${pid_of[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  fail "$sname: start $name" "not serving after 20 s: $(tail -3 "$log")"
  return 1
}
declare -A starts_of=()

# start_worker ID ORG PORT [flags...]: the id must begin with o<ORG>- (the cross-organization
# check reads the organization back from it). Result file and log live in the scenario folder.
# With CURVE (drills/shared/curve.sh) each worker gets a key pair of its own, registered for ORG in
# the scenario's database under its id.
start_worker() {
  local id=$1 org=$2 port=$3
  shift 3
  curve_worker "$id" "$org" "$dsn" || { fail "$sname: keys for $id" "aclaimctl keys failed"; return 1; }
  ACLAIM_CURVE_SECRET_KEY=$curve_worker_secret "$bin/aclaim-worker" "${curve_worker_args[@]}" --connect "tcp://127.0.0.1:$port" --org "$org" --id "$id" \
    --reply-timeout-ms 2000 --claim-wait-ms 500 --result-file "$sdir/results/$id.jsonl" \
    --queues "$(IFS=,; echo "${fault_queues[*]}")" \
    --log-level info "$@" >"$sdir/$id.log" 2>&1 &
  remember "$id" $!
}

# start_workers PORT N [flags...]: workers o1-w1 .. o1-wN of organization 1, each with the flags.
start_workers() {
  local port=$1 n=$2 i
  shift 2
  for i in $(seq "$n"); do start_worker "o1-w$i" 1 "$port" "$@"; done
}

# ---- the scenario's database -------------------------------------------------------------------
q() { timeout -k 5 30 "$pgbin/psql" "$dsn" -qAtX -v ON_ERROR_STOP=1 -c "$1"; }
ctl() { timeout -k 5 60 "$bin/aclaimctl" --dsn "$dsn" "$@"; }
# The jobs of every scenario are dealt over two queues, which every worker serves, so that the
# faults are rehearsed with queues as deployed.
fault_queues=(intake review)
# enqueue ORG COUNT MAX_ATTEMPTS: half the jobs in each queue. The queues are new to the database:
# said with --new-queue to an aclaimctl that refuses unknown queues without it; a previous release's
# (drills/upgrade runs the old binaries as $bin) takes any queue and knows no such flag.
enqueue() {
  local org=$1 n=$2 attempts=$3 half=$(( $2 / 2 )) new_queue=()
  if "$bin/aclaimctl" enqueue --help 2>/dev/null | grep -q -- '--new-queue'; then new_queue=(--new-queue); fi
  if [ "$half" -gt 0 ]; then
    ctl enqueue --org "$org" --count "$half" --max-attempts "$attempts" --queue "${fault_queues[0]}" "${new_queue[@]}" >/dev/null || return 1
  fi
  ctl enqueue --org "$org" --count "$(( n - half ))" --max-attempts "$attempts" --queue "${fault_queues[1]}" "${new_queue[@]}" >/dev/null
}

remaining() { q "SELECT count(*) FROM jobs WHERE state NOT IN ('completed', 'failed', 'discarded', 'cancelled')"; }
completed() { q "SELECT count(*) FROM jobs WHERE state = 'completed'"; }
held_by() { q "SELECT count(*) FROM jobs WHERE state = 'assigned' AND assignee = '$1'"; }
events_of() {  # events_of KIND WORKER-LIKE
  q "SELECT count(*) FROM job_events WHERE kind = '$1' AND worker LIKE '$2'"
}

# wait_for SECONDS COMMAND...: polls observed state every 0.2 s; 1 when the bound passes first.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
is_drained() { [ "$(remaining)" = 0 ]; }
at_least() { local n; n=$("${@:2}") && [ "$n" -ge "$1" ]; }  # at_least N COMMAND...

sidx=0
# scenario_begin NAME DESCRIPTION: a fresh database, migrated, and a folder for the logs.
scenario_begin() {
  sname=$1
  backlog_ok=false
  sidx=$((sidx + 1))
  sdir="$work/$(printf '%02d' "$sidx")-$sname"
  mkdir -p "$sdir/results"
  local db="faults_$sidx"
  dsn="$base_dsn"
  q "CREATE DATABASE $db" >/dev/null
  # A URL (compose/pgtmp) ends in the database's name; the HA cluster's multi-host DSN
  # (compose/ha) is key=value and names it with dbname=.
  if [[ $base_dsn = *dbname=* ]]; then
    dsn=$(sed "s/dbname=[^ ]*/dbname=$db/" <<<"$base_dsn")
  else
    dsn="${base_dsn%/*}/$db"
  fi
  ctl migrate >"$sdir/migrate.log" 2>&1
  scenario_start=$SECONDS
  scenario_failed=$failed
  echo "== $sname: $2"
}

# scenario_end: stops every process, then proves the guarantees from the tables and the result
# files, and prints the summary line.
scenario_end() {
  stop_all
  local jobs left accepted failed_jobs reclaims rejected check_rc=0
  jobs=$(q "SELECT count(*) FROM jobs")
  left=$(remaining)
  accepted=$(q "SELECT count(*) FROM job_events WHERE kind = 'completed'")
  failed_jobs=$(q "SELECT count(*) FROM jobs WHERE state IN ('failed', 'discarded')")
  reclaims=$(q "SELECT count(*) FROM job_events WHERE kind = 'reclaimed'")
  rejected=$(q "SELECT coalesce(string_agg(reason || ':' || n, ' ' ORDER BY reason), 'none')
                  FROM (SELECT split_part(detail, ':', 1) AS reason, count(*) AS n FROM job_events
                         WHERE kind = 'rejected' GROUP BY 1) r")
  ctl check --json >"$sdir/check.json" 2>"$sdir/check.err" || check_rc=$?
  local counts
  counts=$("$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
n = lambda inv: sum(1 for v in d["violations"] if v["invariant"] == inv)
print(n("nothing_lost"), n("single_completion"), n("completion_is_current"), len(d["violations"]))
' "$sdir/check.json" 2>/dev/null) || counts="? ? ? ?"
  local lost_v duplicated stale total
  read -r lost_v duplicated stale total <<<"$counts"
  local lost=$left
  # A backlog scenario ends with jobs nobody was asked to finish: those still pending (or held,
  # or waiting for a retry) are a backlog, not a loss; the checker's nothing_lost still counts.
  ${backlog_ok:-false} && lost=0
  [ "$lost_v" = "?" ] || lost=$((lost + lost_v))
  echo "summary $sname: jobs $jobs, accepted $accepted, failed $failed_jobs," \
    "rejected {$rejected}, reclaims $reclaims, lost $lost, duplicated $duplicated," \
    "stale accepted $stale ($((SECONDS - scenario_start)) s)"

  if [ "$check_rc" = 0 ] && [ "$total" = 0 ]; then
    pass "$sname: aclaimctl check: every invariant holds"
  else
    fail "$sname: aclaimctl check" "exit $check_rc, $total violations: $("$py" -c '
import json, sys
for v in json.load(open(sys.argv[1]))["violations"][:5]: print(v["invariant"], v["job_id"], v["evidence"])
' "$sdir/check.json" 2>/dev/null || cat "$sdir/check.err")"
  fi
  if ${backlog_ok:-false}; then
    local odd
    odd=$(q "SELECT count(*) FROM jobs WHERE state NOT IN ('pending', 'scheduled', 'assigned', 'completed', 'failed', 'discarded', 'cancelled')")
    if [ "$odd" = 0 ]; then
      pass "$sname: nothing lost: $((jobs - left)) jobs terminal, the other $left still waiting in the backlog"
    else
      fail "$sname: nothing lost" "$odd jobs in a state that is neither waiting nor terminal"
    fi
  elif [ "$left" = 0 ]; then
    pass "$sname: nothing lost: all $jobs jobs terminal"
  else
    fail "$sname: nothing lost" "$left of $jobs jobs not terminal"
  fi

  q "SELECT job_id || ',' || generation || ',' || worker FROM job_events WHERE kind = 'completed'" \
    >"$sdir/completed.csv"
  local verdicts rc=0
  verdicts=$("$py" "$shared/verdicts.py" "$sdir/results" "$sdir/completed.csv" 2>&1) || rc=$?
  if [ "$rc" = 0 ]; then
    pass "$sname: every worker verdict agrees with job_events ($verdicts)"
  else
    fail "$sname: worker verdicts agree with job_events" "$(head -6 <<<"$verdicts")"
  fi

  local foreign
  foreign=$(q "SELECT count(*) FROM job_events e JOIN jobs j ON j.id = e.job_id
                WHERE e.kind IN ('claimed', 'completed', 'failed', 'discarded', 'released', 'reclaimed', 'rejected')
                  AND e.worker NOT LIKE 'o' || j.org_id || '-%'")
  if [ "$foreign" = 0 ]; then
    pass "$sname: no job was claimed or completed by another organization's worker"
  else
    fail "$sname: organization isolation" "$foreign events of workers of another organization"
  fi
  if [ "$failed" != "$scenario_failed" ]; then echo "   logs of $sname: $sdir"; fi
}

# The coordinator's own count of something in all of a scenario's logs of one coordinator.
log_count() { cat "$sdir"/"$1".*.log 2>/dev/null | grep -c "$2" || true; }

# ---- after failovers (drills/failover, drills/faults --nemesis --ha) ---------------------------
# fencing_checks NAME LAST_PROMOTION: no fencing token held twice, and every claim granted after
# the last promotion (epoch seconds at which the new primary took writes; empty: none) lies in the
# final timeline's range, above every generation an earlier timeline could have granted.
fencing_checks() {
  local name=$1 last=${2:-} dup below after
  dup=$(q "SELECT count(*) FROM (SELECT job_id, generation FROM job_events WHERE kind = 'claimed'
                                  GROUP BY 1, 2 HAVING count(*) > 1) d")
  if [ "$dup" = 0 ]; then
    pass "$name: no (job, generation) was claimed twice"
  else
    fail "$name: fencing tokens" "$dup tokens were claimed more than once"
  fi
  [ -n "$last" ] || return 0
  below=$(q "SELECT count(*) FROM job_events WHERE kind = 'claimed' AND at > to_timestamp($last)
               AND generation <= aclaim_generation_floor()")
  after=$(q "SELECT count(*) FROM job_events WHERE kind = 'claimed' AND at > to_timestamp($last)")
  if [ "$below" = 0 ] && [ "$after" -gt 0 ]; then
    pass "$name: all $after claims after the last promotion are in timeline $(q "SELECT aclaim_timeline()")'s range of generations"
  else
    fail "$name: the fencing epoch" "$below of $after claims after the last promotion below the timeline's range"
  fi
}

# acknowledged_lost_check NAME [REPORT]: after scenario_end, which wrote the final primary's
# completions: a worker told ACCEPTED for one that is not there had its acknowledged completion
# lost. That count means something only if the workers' verdicts were read: with no result file,
# or a worker that heard none of its completions, it is 0 whatever was lost (verdicts.py's
# UNHEARD). The line "acknowledged completions lost: N (of M ACCEPTED heard)" goes to REPORT too.
acknowledged_lost_check() {
  local name=$1 report=${2:-/dev/null} verdicts lost unheard heard
  verdicts=$("$py" "$shared/verdicts.py" "$sdir/results" "$sdir/completed.csv" 2>&1 || true)
  lost=$(grep -c '^LIE .*told ACCEPTED' <<<"$verdicts" || true)
  unheard=$(grep -c '^UNHEARD ' <<<"$verdicts" || true)
  heard=$(grep -o ' accepted=[0-9]*' <<<"$verdicts" | grep -o '[0-9]*' || echo 0)
  echo "acknowledged completions lost: $lost (of ${heard:-0} ACCEPTED heard)" | tee -a "$report"
  if [ "$lost" = 0 ] && [ "$unheard" = 0 ] && [ "${heard:-0}" -gt 0 ]; then
    pass "$name: no acknowledged completion was lost (${heard} ACCEPTED verdicts checked)"
  elif [ "$lost" != 0 ]; then
    fail "$name: acknowledged completions lost" "$lost completions workers were told ACCEPTED for are not on the final primary"
  else
    fail "$name: acknowledged completions checked" "no ACCEPTED verdict to check, or workers that heard too few: $(grep -m 3 '^UNHEARD ' <<<"$verdicts" || echo 'result files empty')"
  fi
}

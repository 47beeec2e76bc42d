# shellcheck shell=bash disable=SC2154,SC2034
# The continuous nemesis of drills/faults (--nemesis SECONDS), sourced by it: faults drawn at
# random from every kind the drills know, overlapping, while jobs are enqueued all along, workers
# review them and a consumer group follows the verdicts. It ends like every scenario (aclaimctl
# check, nothing lost, every worker's verdict against job_events) and adds a per-fault report and
# the consumer group's check: every completed job's verdict reached the group.
#
# One scheduler loop (a tick every 0.5 s) starts faults and ends them when their time is up, so
# that faults of different kinds overlap; kinds that would fight each other (two faults of the
# database, two of one coordinator, two of one worker) wait for the one under way. The kinds:
#   worker_kill      SIGKILL a worker, start a replacement
#   worker_stop      SIGSTOP a worker for 0.5-4 s (past its 2 s lease at times), then SIGCONT
#   coordinator_kill SIGKILL a coordinator, start it again on its endpoint
#   coordinator_skew restart a coordinator with its clock 300 ms off for 5-10 s, then without
#   pg_restart       pg_ctl restart -m immediate
#   pg_freeze        SIGSTOP PostgreSQL (the postmaster and every backend) for 1-3 s, then SIGCONT
#   net_cut          the relay in front of two workers blackholes or refuses for 3-6 s, then heals
# The HA cluster's faults (primary kill, switchover) are drills/failover's; this runs on a single
# server. RANDOM is seeded from --seed (printed), so a run can be repeated.

nemesis_kinds="worker_kill worker_stop coordinator_kill coordinator_skew pg_restart pg_freeze net_cut"
declare -A nem_count=() nem_until=() nem_busy=()

pg_pids() {
  local postmaster
  postmaster=$(head -1 "$pgdir/data/postmaster.pid" 2>/dev/null) || return 0
  echo "$postmaster"
  ps -o pid= --ppid "$postmaster" 2>/dev/null || true
}
pg_signal() { local p; for p in $(pg_pids); do kill -"$1" "$p" 2>/dev/null || true; done; }

nemesis_log() { echo "$(($(date +%s%3N) - nem_t0)) ms $*" >>"$sdir/nemesis.log"; }

# A worker slot: its current name, the organization and the endpoints it lists.
declare -a nem_worker=() nem_connect=()
nemesis_start_worker() {  # nemesis_start_worker SLOT
  local slot=$1 gen=${nem_gen[$1]:-0} try
  nem_gen[slot]=$((gen + 1))
  nem_worker[slot]="o1-n$slot.${nem_gen[slot]}"
  # A replacement registers its key in the database, which a fault under way may keep away: wait
  # (bounded) until a registration goes through, as an operator's retry would, before starting it.
  for try in $(seq 30); do
    curve_worker "${nem_worker[slot]}-probe$try" 1 "$dsn" 2>>"$sdir/keys.err" && break
    sleep 1
  done
  start_worker "${nem_worker[slot]}" 1 "${nem_connect[slot]}" --concurrency 4 --review-ms 150 --review-dist lognormal --fail-rate 0.02
}
# worker_running SLOT: its current worker was started and is still ours to signal.
worker_running() { [ -n "${pid_of[${nem_worker[$1]}]:-}" ]; }
declare -a nem_gen=()

nemesis_begin() {  # nemesis_begin KIND: starts one fault; sets nem_until and nem_busy for lasting ones
  local kind=$1 slot side now
  now=$(date +%s%3N)
  # A fault that starts a process needs the database (keys, migrations, the first connection):
  # it waits while PostgreSQL is frozen, or it would hold the scheduler, and the thaw, up.
  case "$kind" in
    worker_kill | coordinator_kill | coordinator_skew) [ -z "${nem_busy[pg]:-}" ] || return 1 ;;
  esac
  case "$kind" in
    worker_kill)
      slot=$((RANDOM % ${#nem_worker[@]}))
      [ -z "${nem_busy[w$slot]:-}" ] || return 1
      if ! worker_running "$slot"; then nemesis_start_worker "$slot"; return 1; fi
      kill_one "${nem_worker[slot]}"
      nemesis_log "worker_kill ${nem_worker[slot]}"
      nemesis_start_worker "$slot" ;;
    worker_stop)
      slot=$((RANDOM % ${#nem_worker[@]}))
      [ -z "${nem_busy[w$slot]:-}" ] || return 1
      worker_running "$slot" || return 1
      signal_one "${nem_worker[slot]}" STOP
      nem_busy[w$slot]=worker_stop
      nem_until[w$slot]=$((now + 500 + RANDOM % 3500))
      nemesis_log "worker_stop ${nem_worker[slot]} until +$(( ${nem_until[w$slot]} - now )) ms" ;;
    coordinator_kill)
      side=$((RANDOM % 2))
      [ -z "${nem_busy[c$side]:-}" ] || return 1
      kill_one "coordinator-$side"
      nemesis_log "coordinator_kill coordinator-$side"
      start_coordinator "coordinator-$side" "${nem_port[side]}" || return 1 ;;
    coordinator_skew)
      side=$((RANDOM % 2))
      [ -z "${nem_busy[c$side]:-}" ] || return 1
      local skew=300
      [ $((RANDOM % 2)) = 0 ] || skew=-300
      stop_one "coordinator-$side"
      start_coordinator "coordinator-$side" "${nem_port[side]}" --clock-skew-ms "$skew" || return 1
      nem_busy[c$side]=coordinator_skew
      nem_until[c$side]=$((now + 5000 + RANDOM % 5000))
      nemesis_log "coordinator_skew coordinator-$side ${skew} ms" ;;
    pg_restart)
      [ -z "${nem_busy[pg]:-}" ] || return 1
      nemesis_log "pg_restart"
      timeout -k 5 120 "$root/compose/pgtmp" restart "$pgdir" >>"$sdir/pg-restart.log" 2>&1 || return 1 ;;
    pg_freeze)
      [ -z "${nem_busy[pg]:-}" ] || return 1
      pg_signal STOP
      nem_busy[pg]=pg_freeze
      nem_until[pg]=$((now + 1000 + RANDOM % 2000))
      nemesis_log "pg_freeze until +$((nem_until[pg] - now)) ms" ;;
    net_cut)
      [ -z "${nem_busy[net]:-}" ] || return 1
      local how=blackhole
      [ $((RANDOM % 2)) = 0 ] || how=refuse
      relay_ctl cut "$how" >>"$sdir/relay-ctl.log" || return 1
      nem_busy[net]=net_cut
      nem_until[net]=$((now + 3000 + RANDOM % 3000))
      nemesis_log "net_cut $how until +$((nem_until[net] - now)) ms" ;;
  esac
  nem_count[$kind]=$((${nem_count[$kind]:-0} + 1))
}

nemesis_end() {  # nemesis_end KEY: heals the lasting fault under KEY (w<slot>, c<side>, pg, net)
  local key=$1
  case "${nem_busy[$key]}" in
    worker_stop) signal_one "${nem_worker[${key#w}]}" CONT 2>/dev/null || true ;;
    coordinator_skew)
      local side=${key#c}
      stop_one "coordinator-$side"
      start_coordinator "coordinator-$side" "${nem_port[side]}" || true ;;
    pg_freeze) pg_signal CONT ;;
    net_cut) relay_ctl heal >>"$sdir/relay-ctl.log" || true ;;
  esac
  nemesis_log "end ${nem_busy[$key]} ($key)"
  unset "nem_busy[$key]" "nem_until[$key]"
}

nemesis_heal_all() {
  local key
  for key in "${!nem_busy[@]}"; do nemesis_end "$key"; done
  pg_signal CONT
}

declare -a nem_port=()
scenario_nemesis() {
  local seconds=$1 seed=$2
  RANDOM=$seed
  scenario_begin nemesis "random overlapping faults of $(wc -w <<<"$nemesis_kinds") kinds for $seconds s (seed $seed) under continuous enqueue, work and a consumer group"
  nem_t0=$(date +%s%3N)
  enqueue 1 400 50
  nem_port=("$(free_port)" "$(free_port)")
  start_coordinator coordinator-0 "${nem_port[0]}" || { scenario_end; return; }
  start_coordinator coordinator-1 "${nem_port[1]}" || { scenario_end; return; }
  "$py" "$lib/relay.py" serve --target "${nem_port[0]}" --ports-file "$sdir/relay.ports" \
    --max-seconds $((seconds + 900)) >"$sdir/relay.log" 2>&1 &
  remember relay $!
  wait_for 10 test -s "$sdir/relay.ports" || { fail "nemesis: start relay" "$(cat "$sdir/relay.log")"; scenario_end; return; }
  local relay_port
  read -r relay_port relay_control <"$sdir/relay.ports"
  local a="tcp://127.0.0.1:${nem_port[0]}" b="tcp://127.0.0.1:${nem_port[1]}"
  # Two workers near each coordinator (the other one second), two far ones behind the relay.
  nem_connect=("${nem_port[0]},$b" "${nem_port[0]},$b" "${nem_port[1]},$a" "${nem_port[1]},$a"
    "$relay_port,$b" "$relay_port,$b")
  local slot
  for slot in "${!nem_connect[@]}"; do nemesis_start_worker "$slot"; done

  # The producer and the consumer group run beside the scheduler, each in a loop of its own that
  # outlives the database's absences; a file ends them.
  local stop_file="$sdir/nemesis.stop"
  (
    while [ ! -e "$stop_file" ]; do
      if ctl enqueue --org 1 --count 20 --max-attempts 50 --queue "${fault_queues[$((RANDOM % 2))]}" >/dev/null 2>&1; then
        echo ok >>"$sdir/producer.log"
      else
        echo refused >>"$sdir/producer.log"
      fi
      sleep 0.5
    done
  ) &
  remember producer $!
  (
    while [ ! -e "$stop_file" ]; do
      # Its pid in a file, so that the end can stop the follow itself, not only this loop.
      "$bin/aclaimctl" --dsn "$dsn" results follow --group nemesis --org 1 --from earliest --json \
        --wait 2s --idle-exit 10s >>"$sdir/verdicts.jsonl" 2>>"$sdir/consumer.err" &
      echo $! >"$sdir/follow.pid"
      wait $! || true
      sleep 0.5
    done
  ) &
  remember consumer $!

  local end_at=$((nem_t0 + seconds * 1000)) now key kind next_fault=$((nem_t0 + 2000))
  while now=$(date +%s%3N) && [ "$now" -lt "$end_at" ]; do
    # The database is healed first: ending another fault may start a process that needs it.
    if [ -n "${nem_until[pg]:-}" ] && [ "$now" -ge "${nem_until[pg]}" ]; then nemesis_end pg; fi
    for key in "${!nem_until[@]}"; do
      # Ending a skew restarts a coordinator: not while PostgreSQL is frozen.
      [[ $key = c* && -n "${nem_busy[pg]:-}" ]] && continue
      [ "$now" -lt "${nem_until[$key]}" ] || nemesis_end "$key"
    done
    if [ "$now" -ge "$next_fault" ]; then
      read -r -a kinds <<<"$nemesis_kinds"
      kind=${kinds[$((RANDOM % ${#kinds[@]}))]}
      nemesis_begin "$kind" || nemesis_log "skipped $kind (busy or failed)"
      next_fault=$((now + 1000 + RANDOM % 3000))
    fi
    sleep 0.5
  done
  nemesis_heal_all
  touch "$stop_file"
  # Stop the loops themselves (a follow waiting on its notification would hold on for its wait).
  stop_one producer
  stop_one consumer
  kill -TERM "$(cat "$sdir/follow.pid" 2>/dev/null)" 2>/dev/null || true
  local enqueued
  enqueued=$(q "SELECT count(*) FROM jobs")
  wait_for "$drain_s" is_drained || true
  # The group catches up with what is left, then every completed job must have reached it.
  timeout -k 5 120 "$bin/aclaimctl" --dsn "$dsn" results follow --group nemesis --org 1 --json \
    --idle-exit 3s --wait 1s >>"$sdir/verdicts.jsonl" 2>>"$sdir/consumer.err" || true
  q "SELECT id FROM jobs WHERE state = 'completed' ORDER BY id" >"$sdir/completed.ids"
  local missing report total_faults=0 k
  missing=$("$py" -c '
import json, sys
seen = set()
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        seen.add(int(json.loads(line)["job_id"]))
done = [int(x) for x in open(sys.argv[2]) if x.strip()]
print(sum(1 for j in done if j not in seen), len(done), len(seen))
' "$sdir/verdicts.jsonl" "$sdir/completed.ids" 2>&1) || missing="? ? ?"
  report=""
  for k in $nemesis_kinds; do
    report="$report $k=${nem_count[$k]:-0}"
    total_faults=$((total_faults + ${nem_count[$k]:-0}))
  done
  echo "nemesis faults:$report (seed $seed; $sdir/nemesis.log has each one's time)"
  local drawn=0
  for k in $nemesis_kinds; do [ "${nem_count[$k]:-0}" = 0 ] || drawn=$((drawn + 1)); done
  local producer_ok
  producer_ok=$(grep -c ok "$sdir/producer.log" 2>/dev/null || true)
  if [ "$total_faults" -ge 3 ] && [ "$producer_ok" -ge 1 ]; then
    pass "nemesis: $total_faults faults of $drawn kinds in $seconds s ($report ), $enqueued jobs enqueued along the way ($producer_ok batches of 20 accepted by the database)"
  else
    fail "nemesis: faults injected under load" "$total_faults faults ($report ), $producer_ok enqueue batches accepted"
  fi
  local miss done_n seen_n
  read -r miss done_n seen_n <<<"$missing"
  if [ "$miss" = 0 ] && [ "$done_n" -gt 0 ]; then
    pass "nemesis: the consumer group got the verdict of every one of the $done_n completed jobs ($seen_n distinct verdicts read)"
  else
    fail "nemesis: consumer group complete" "$missing (missing, completed, read)"
  fi
  scenario_end
}

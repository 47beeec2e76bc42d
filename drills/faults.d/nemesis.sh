# shellcheck shell=bash disable=SC2154,SC2034
# The continuous nemesis of drills/faults (--nemesis SECONDS), sourced by it: faults drawn at
# random from every kind the drills know, overlapping, while jobs are enqueued all along, workers
# review them and a consumer group follows the verdicts. It ends like every scenario (aclaimctl
# check, nothing lost, every worker's verdict against job_events) and adds a per-fault report and
# the consumer group's check: every completed job's verdict reached the group.
#
# One scheduler loop (a tick every 0.5 s) starts faults and ends them when their time is up, so
# that faults of different kinds overlap; kinds that would fight each other (two faults of the
# database, two of one coordinator, two of one worker) wait for the one under way. The draw is a
# shuffled round of every kind first (a kind that cannot go in yet goes to the round's end), then
# kinds at random; the run goes on past its seconds until the round is done (at most 180 s more,
# 300 s on the cluster, whose four database kinds hold it 15-45 s each, one after another). It
# passes only if every kind went in and two faults were active at once at some moment: each
# fault's start and end (a kill: until its replacement runs; a database fault on the cluster:
# until every member streams again) go to faults.tsv, which the check reads. The kinds:
#   worker_kill      SIGKILL a worker, start a replacement
#   worker_stop      SIGSTOP a worker for 0.5-4 s (past its 2 s lease at times), then SIGCONT
#   coordinator_kill SIGKILL a coordinator, start it again on its endpoint
#   coordinator_skew restart a coordinator with its clock 300 ms off for 5-10 s, then without
#   pg_restart       pg_ctl restart -m immediate
#   pg_freeze        SIGSTOP PostgreSQL (the postmaster and every backend) for 1-3 s, then SIGCONT
#   net_cut          the relay in front of two workers blackholes or refuses for 3-6 s, then heals
# With --ha the database is the local HA cluster (compose/ha: three members under Patroni,
# synchronous replication) and two kinds join the draw:
#   primary_kill     SIGKILL the primary's Patroni and PostgreSQL together (its machine dies): the
#                    synchronous standby is promoted; the dead member is revived once the new
#                    primary takes writes, and rejoins as a standby
#   switchover       compose/ha switchover (patronictl switchover to the synchronous standby)
# and the two database kinds act on whichever member is primary when they are drawn:
#   pg_restart       SIGKILL of the primary's PostgreSQL alone (compose/ha crash): its Patroni,
#                    which still holds the leader key, recovers it in place (crash recovery, then a
#                    promotion of the same member onto a new timeline) - what pg_ctl restart -m
#                    immediate is to one server
#   pg_freeze        SIGSTOP of the primary's PostgreSQL for 1-3 s, shorter than Patroni's ttl (6 s):
#                    a hang the coordinators must wait out, not a failover
# On the cluster a database fault ends when the cluster says so, not on a clock: once a primary
# with a synchronous standby takes writes again ("writable"), and then once every member streams
# ("whole"); the scheduler polls that on each tick and never waits on it. Faults that start a
# process (they need the database) wait while it is not writable, as they wait on a frozen server;
# the next database fault waits until the cluster is whole again, so that only one member is ever
# down and two of three always stand. RANDOM is seeded from --seed (printed), so a run can be
# repeated. --kinds draws only the kinds it names, for investigating; the every-kind check then
# fails, as it must.

nemesis_kinds="worker_kill worker_stop coordinator_kill coordinator_skew pg_restart pg_freeze net_cut"
ha_kinds=(primary_kill switchover)
if ${ha_mode:-false}; then nemesis_kinds="$nemesis_kinds ${ha_kinds[*]}"; fi
declare -A nem_count=() nem_until=() nem_busy=()

# Each fault's time under way, by an id (the key of a lasting fault, "db" for a database fault,
# "x" for a fault that is over once its step returns): faults.tsv gets "start end kind target",
# in ms from the start of the run, when it ends.
declare -A nem_since=() nem_what=()
nem_on() {  # nem_on ID KIND [TARGET]
  nem_since[$1]=$(date +%s%3N)
  nem_what[$1]="$2${3:+	$3}"
}
nem_off() {  # nem_off ID
  [ -n "${nem_since[$1]:-}" ] || return 0
  printf '%s\t%s\t%s\n' $((nem_since[$1] - nem_t0)) $(($(date +%s%3N) - nem_t0)) "${nem_what[$1]}" \
    >>"$sdir/faults.tsv"
  unset "nem_since[$1]" "nem_what[$1]"
}

pg_pids() {  # pg_pids [MEMBER]: the postmaster and its children, of the server or of a member
  local postmaster pidfile="$pgdir/data/postmaster.pid"
  [ -z "${1:-}" ] || pidfile="$hadir/$1/data/postmaster.pid"
  postmaster=$(head -1 "$pidfile" 2>/dev/null) || return 0
  [ -n "$postmaster" ] || return 0
  echo "$postmaster"
  ps -o pid= --ppid "$postmaster" 2>/dev/null || true
}
pg_signal() {  # pg_signal SIGNAL: the server's, or on the cluster the member nem_pg_member names
  local p
  for p in $(pg_pids "${nem_pg_member:-}"); do kill -"$1" "$p" 2>/dev/null || true; done
}
nem_pg_member=""

# ---- the HA cluster (--ha) ----------------------------------------------------------------------
ha_ctl() { timeout -k 5 "$1" "$root/compose/ha" "${@:2}" --dir "$hadir"; }
ha_writable() { ha_ctl 20 wait --seconds 0 >/dev/null 2>&1; }        # a primary, a sync standby
ha_whole() { ha_ctl 20 wait --all --seconds 0 >/dev/null 2>&1; }     # and every member streams
ha_primary() { ha_ctl 20 primary 2>/dev/null || true; }
# The fault under way on the cluster: its member, when it began (ms), when the cluster took writes.
nem_ha_from="" nem_ha_at=0 nem_ha_writable=0 nem_ha_to="" nem_ha_late=false nem_sw_pid=""
nem_timeline="" nem_last_promotion=""
declare -a nem_ha_report=()

ha_fault_begin() {  # ha_fault_begin: the primary to act on, or 1 when there is none
  nem_ha_from=$(ha_primary)
  [ -n "$nem_ha_from" ] || return 1
  nem_ha_at=$(date +%s%3N)
  nem_ha_late=false
}

# One tick of the cluster's faults: a database fault waits (without holding the scheduler) for a
# primary that takes writes, then for every member to stream again.
nemesis_ha_tick() {
  local now=$1 kind rc tl
  if [ -n "${nem_busy[pg]:-}" ] && [ -z "${nem_until[pg]:-}" ]; then
    kind=${nem_busy[pg]}
    if [ -n "$nem_sw_pid" ]; then
      kill -0 "$nem_sw_pid" 2>/dev/null && return 0
      rc=0
      wait "$nem_sw_pid" || rc=$?
      nem_sw_pid=""
      [ "$rc" = 0 ] || fail "nemesis: switchover from $nem_ha_from" "compose/ha switchover exit $rc: $(tail -2 "$sdir/switchover.log")"
    fi
    if ha_writable; then
      now=$(date +%s%3N)
      nem_ha_writable=$now
      nem_ha_to=$(ha_primary)
      tl=$(q "SELECT aclaim_timeline()" 2>/dev/null || echo "?")
      # A new timeline is a promotion: claims from now on must be in its range of generations.
      if [ "$tl" != "$nem_timeline" ]; then
        nem_last_promotion=$(date +%s.%N)
        nem_timeline=$tl
      fi
      if [ "$kind" = primary_kill ]; then
        ha_ctl 30 revive "$nem_ha_from" >>"$sdir/ha-revive.log" 2>&1 ||
          fail "nemesis: revive $nem_ha_from" "$(tail -2 "$sdir/ha-revive.log")"
      fi
      nemesis_log "writable after $kind of $nem_ha_from: $nem_ha_to primary on timeline $tl after $((now - nem_ha_at)) ms"
      unset "nem_busy[pg]"
      nem_busy[ha]=$kind
      nem_ha_late=false
    elif [ $((now - nem_ha_at)) -gt 90000 ] && ! $nem_ha_late; then
      nem_ha_late=true
      fail "nemesis: a primary after $kind of $nem_ha_from" "none that takes writes within 90 s: $(ha_ctl 20 members 2>&1 | paste -sd';' -)"
    fi
    return 0
  fi
  if [ -n "${nem_busy[ha]:-}" ]; then
    kind=${nem_busy[ha]}
    if ha_whole; then
      now=$(date +%s%3N)
      nem_ha_report+=("$(printf '%8.1f s  %-12s %-4s -> %-4s  writable in %5.1f s, whole in %5.1f s, timeline %s'         "$(awk -v a="$nem_ha_at" -v t="$nem_t0" 'BEGIN { print (a - t) / 1000 }')" "$kind" "$nem_ha_from" "$nem_ha_to"         "$(awk -v a="$nem_ha_at" -v b="$nem_ha_writable" 'BEGIN { print (b - a) / 1000 }')"         "$(awk -v a="$nem_ha_at" -v b="$now" 'BEGIN { print (b - a) / 1000 }')" "$nem_timeline")")
      nemesis_log "whole after $kind of $nem_ha_from after $((now - nem_ha_at)) ms"
      nem_off db
      unset "nem_busy[ha]"
    elif [ $((now - nem_ha_at)) -gt 180000 ] && ! $nem_ha_late; then
      nem_ha_late=true
      fail "nemesis: the cluster whole after $kind of $nem_ha_from" "not every member streams within 180 s: $(ha_ctl 20 members 2>&1 | paste -sd';' -)"
    fi
  fi
}

# nemesis_ha_settle SECONDS: ticks until no database fault is under way on the cluster.
nemesis_ha_settle() {
  local deadline=$((SECONDS + $1))
  while [ -n "${nem_busy[pg]:-}${nem_busy[ha]:-}" ] && [ "$SECONDS" -lt "$deadline" ]; do
    nemesis_ha_tick "$(date +%s%3N)"
    sleep 0.5
  done
  [ -z "${nem_busy[pg]:-}${nem_busy[ha]:-}" ] ||
    fail "nemesis: the cluster heals at the end" "${nem_busy[pg]:-}${nem_busy[ha]:-} of $nem_ha_from still under way after $1 s: $(ha_ctl 20 members 2>&1 | paste -sd';' -)"
}

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
  # On the cluster they wait too while no member takes writes, whatever the cause; and a database
  # fault waits until the cluster is whole again after the last one.
  case "$kind" in
    worker_kill | coordinator_kill | coordinator_skew)
      [ -z "${nem_busy[pg]:-}" ] || return 1
      ! $ha_mode || ha_writable || return 1 ;;
    pg_restart | pg_freeze | primary_kill | switchover)
      [ -z "${nem_busy[pg]:-}${nem_busy[ha]:-}" ] || return 1
      if $ha_mode; then ha_fault_begin || return 1; fi ;;
  esac
  case "$kind" in
    worker_kill)
      slot=$((RANDOM % ${#nem_worker[@]}))
      [ -z "${nem_busy[w$slot]:-}" ] || return 1
      if ! worker_running "$slot"; then nemesis_start_worker "$slot"; return 1; fi
      nem_on x worker_kill "${nem_worker[slot]}"
      kill_one "${nem_worker[slot]}"
      nemesis_log "worker_kill ${nem_worker[slot]}"
      nemesis_start_worker "$slot"
      nem_off x ;;
    worker_stop)
      slot=$((RANDOM % ${#nem_worker[@]}))
      [ -z "${nem_busy[w$slot]:-}" ] || return 1
      worker_running "$slot" || return 1
      nem_on "w$slot" worker_stop "${nem_worker[slot]}"
      signal_one "${nem_worker[slot]}" STOP
      nem_busy[w$slot]=worker_stop
      nem_until[w$slot]=$((now + 500 + RANDOM % 3500))
      nemesis_log "worker_stop ${nem_worker[slot]} until +$(( ${nem_until[w$slot]} - now )) ms" ;;
    coordinator_kill)
      side=$((RANDOM % 2))
      [ -z "${nem_busy[c$side]:-}" ] || return 1
      nem_on x coordinator_kill "coordinator-$side"
      kill_one "coordinator-$side"
      nemesis_log "coordinator_kill coordinator-$side"
      start_coordinator "coordinator-$side" "${nem_port[side]}" || return 1
      nem_off x ;;
    coordinator_skew)
      side=$((RANDOM % 2))
      [ -z "${nem_busy[c$side]:-}" ] || return 1
      local skew=300
      [ $((RANDOM % 2)) = 0 ] || skew=-300
      nem_on "c$side" coordinator_skew "coordinator-$side $skew ms"
      stop_one "coordinator-$side"
      start_coordinator "coordinator-$side" "${nem_port[side]}" --clock-skew-ms "$skew" || return 1
      nem_busy[c$side]=coordinator_skew
      nem_until[c$side]=$((now + 5000 + RANDOM % 5000))
      nemesis_log "coordinator_skew coordinator-$side ${skew} ms" ;;
    pg_restart)
      nem_on db pg_restart "$nem_ha_from"
      if $ha_mode; then
        ha_ctl 30 crash "$nem_ha_from" >>"$sdir/ha-kill.log" 2>&1 || return 1
        nem_busy[pg]=pg_restart
        nemesis_log "pg_restart: SIGKILL of $nem_ha_from's PostgreSQL (its Patroni recovers it)"
      else
        nemesis_log "pg_restart"
        timeout -k 5 120 "$root/compose/pgtmp" restart "$pgdir" >>"$sdir/pg-restart.log" 2>&1 || return 1
        nem_off db
      fi ;;
    pg_freeze)
      nem_pg_member=$nem_ha_from
      nem_on db pg_freeze "$nem_pg_member"
      pg_signal STOP
      nem_busy[pg]=pg_freeze
      nem_until[pg]=$((now + 1000 + RANDOM % 2000))
      nemesis_log "pg_freeze ${nem_pg_member:-}${nem_pg_member:+ }until +$((nem_until[pg] - now)) ms" ;;
    primary_kill)
      nem_on db primary_kill "$nem_ha_from"
      ha_ctl 30 kill "$nem_ha_from" >>"$sdir/ha-kill.log" 2>&1 || return 1
      nem_busy[pg]=primary_kill
      nemesis_log "primary_kill $nem_ha_from (Patroni and PostgreSQL)" ;;
    switchover)
      # In the background: the scheduler goes on while Patroni hands over.
      nem_on db switchover "$nem_ha_from"
      timeout -k 5 100 "$root/compose/ha" switchover --dir "$hadir" >>"$sdir/switchover.log" 2>&1 &
      nem_sw_pid=$!
      nem_busy[pg]=switchover
      nemesis_log "switchover from $nem_ha_from" ;;
    net_cut)
      [ -z "${nem_busy[net]:-}" ] || return 1
      local how=blackhole
      [ $((RANDOM % 2)) = 0 ] || how=refuse
      nem_on net net_cut "$how"
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
    worker_stop)
      signal_one "${nem_worker[${key#w}]}" CONT 2>/dev/null || true
      nem_off "$key" ;;
    coordinator_skew)
      local side=${key#c}
      stop_one "coordinator-$side"
      start_coordinator "coordinator-$side" "${nem_port[side]}" || true
      nem_off "$key" ;;
    pg_freeze)
      pg_signal CONT
      # On the cluster the thaw is not the end: the fault ends once the cluster takes writes.
      if $ha_mode; then
        nemesis_log "thaw of $nem_pg_member; waiting for the cluster"
        unset "nem_until[$key]"
        return 0
      fi
      nem_off db ;;
    net_cut)
      relay_ctl heal >>"$sdir/relay-ctl.log" || true
      nem_off "$key" ;;
  esac
  nemesis_log "end ${nem_busy[$key]} ($key)"
  unset "nem_busy[$key]" "nem_until[$key]"
}

nemesis_heal_all() {
  local key m
  for key in "${!nem_busy[@]}"; do
    # A cluster fault that waits on the cluster has nothing to heal here (nemesis_ha_settle).
    [ "$key" = ha ] && continue
    [ "$key" = pg ] && $ha_mode && [ -z "${nem_until[pg]:-}" ] && continue
    nemesis_end "$key"
  done
  if $ha_mode; then
    for m in pg1 pg2 pg3; do nem_pg_member=$m pg_signal CONT; done
  else
    pg_signal CONT
  fi
}

declare -a nem_port=()
scenario_nemesis() {
  local seconds=$1 seed=$2
  RANDOM=$seed
  local where="one PostgreSQL"
  $ha_mode && where="the HA cluster (three members, synchronous replication)"
  scenario_begin nemesis "random overlapping faults of $(wc -w <<<"$nemesis_kinds") kinds for $seconds s (seed $seed) on $where under continuous enqueue, work and a consumer group"
  # The kinds drawn: every kind, or (--kinds) those named, which must be kinds of this run.
  local -a draw=()
  local k
  read -r -a draw <<<"${nemesis_only//,/ }"
  [ "${#draw[@]}" -gt 0 ] || read -r -a draw <<<"$nemesis_kinds"
  for k in "${draw[@]}"; do
    [[ " $nemesis_kinds " = *" $k "* ]] || { fail "nemesis: --kinds" "$k is no kind of this run ($nemesis_kinds)"; scenario_end; return; }
  done
  # The first round: every kind drawn once, in an order the seed shuffles (Fisher-Yates).
  local -a first_round=("${draw[@]}")
  local i r t
  for ((i = ${#first_round[@]} - 1; i > 0; i--)); do
    r=$((RANDOM % (i + 1))); t=${first_round[i]}; first_round[i]=${first_round[r]}; first_round[r]=$t
  done
  [ -z "$nemesis_only" ] || echo "nemesis: drawing only $nemesis_only (--kinds): the every-kind check must fail"
  nem_t0=$(date +%s%3N)
  : >"$sdir/faults.tsv"
  if $ha_mode; then nem_timeline=$(q "SELECT aclaim_timeline()"); fi
  local initial=400
  enqueue 1 "$initial" 50
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
      if ctl enqueue --org 1 --count 20 --max-attempts 50 --queue "${fault_queues[$((RANDOM % 2))]}" --new-queue >/dev/null 2>&1; then
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

  # The run ends after its seconds once the first round is done, and at the latest 180 s later
  # (300 s on the cluster).
  local end_at=$((nem_t0 + seconds * 1000)) now key kind next_fault=$((nem_t0 + 2000)) from_round
  local last_at=$((end_at + 180000))
  if $ha_mode; then last_at=$((end_at + 300000)); fi
  while now=$(date +%s%3N) && { [ "$now" -lt "$end_at" ] || { [ "${#first_round[@]}" -gt 0 ] && [ "$now" -lt "$last_at" ]; }; }; do
    # The database is healed first: ending another fault may start a process that needs it.
    if [ -n "${nem_until[pg]:-}" ] && [ "$now" -ge "${nem_until[pg]}" ]; then nemesis_end pg; fi
    for key in "${!nem_until[@]}"; do
      # Ending a skew restarts a coordinator: not while PostgreSQL is frozen.
      [[ $key = c* && -n "${nem_busy[pg]:-}" ]] && continue
      [ "$now" -lt "${nem_until[$key]}" ] || nemesis_end "$key"
    done
    if $ha_mode; then nemesis_ha_tick "$now"; fi
    if [ "$now" -ge "$next_fault" ]; then
      # The round first: its head, which goes to the round's end when it cannot go in yet.
      if [ "${#first_round[@]}" -gt 0 ]; then
        kind=${first_round[0]}; first_round=("${first_round[@]:1}"); from_round=true
      else
        kind=${draw[$((RANDOM % ${#draw[@]}))]}; from_round=false
      fi
      if ! nemesis_begin "$kind"; then
        nemesis_log "skipped $kind (busy or failed)"
        if $from_round; then first_round+=("$kind"); fi
      fi
      next_fault=$((now + 1000 + RANDOM % 3000))
    fi
    sleep 0.5
  done
  if $ha_mode; then
    # The cluster first: a frozen primary thaws, and every database fault under way ends (the
    # killed member revived) before faults that start a coordinator are healed.
    if [ -n "${nem_until[pg]:-}" ]; then nemesis_end pg; fi
    nemesis_ha_settle 240
  fi
  nemesis_heal_all
  touch "$stop_file"
  # Stop the loops themselves (a follow waiting on its notification would hold on for its wait).
  stop_one producer
  stop_one consumer
  kill -TERM "$(cat "$sdir/follow.pid" 2>/dev/null)" 2>/dev/null || true
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
  if $ha_mode; then
    echo "nemesis database faults on the cluster (from the start of the run; writable: a primary with a synchronous standby takes writes again; whole: every member streams):"
    if [ "${#nem_ha_report[@]}" = 0 ]; then echo "  none"; else printf '  %s\n' "${nem_ha_report[@]}"; fi
    # As the failover drill reports them: commits the faults interrupted, resolved from the row,
    # and statements the coordinators gave up on at their deadline (answered outcome_unknown).
    echo "in-doubt commits resolved from the row: $(cat "$sdir"/coordinator-*.log | grep -c "resolved from the row as applied" || true) applied," \
      "$(cat "$sdir"/coordinator-*.log | grep -c "resolved from the row as not applied" || true) not applied," \
      "$(cat "$sdir"/coordinator-*.log | grep -c "resolved from the row as unknown" || true) unknown;" \
      "statements past their deadline: $(cat "$sdir"/coordinator-*.log | grep -c "did not answer within" || true)"
  fi
  # Every kind of this run went in (the first round guarantees it unless a kind never could).
  local missing_kinds="" ran_s=$(( ($(date +%s%3N) - nem_t0) / 1000 ))
  for k in $nemesis_kinds; do [ "${nem_count[$k]:-0}" -gt 0 ] || missing_kinds="$missing_kinds $k"; done
  if [ -z "$missing_kinds" ]; then
    pass "nemesis: every one of the $(wc -w <<<"$nemesis_kinds") kinds went in: $total_faults faults ($report ) in $ran_s s ($seconds s asked)"
  else
    fail "nemesis: every fault kind went in" "never injected:$missing_kinds ($total_faults faults:$report; the first round left: ${first_round[*]:-nothing})"
  fi
  # Overlap, from faults.tsv: pairs of faults under way at the same time, the most at once, and
  # the time with two or more under way.
  local overlap
  overlap=$("$py" - "$sdir/faults.tsv" <<'PY' 2>&1
import sys
faults = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 3:
        faults.append((int(f[0]), int(f[1]), f[2]))
pairs = sum(1 for i, a in enumerate(faults) for b in faults[i + 1:]
            if a[0] < b[1] and b[0] < a[1])
kinds = sorted({" + ".join(sorted((a[2], b[2]))) for i, a in enumerate(faults) for b in faults[i + 1:]
                if a[0] < b[1] and b[0] < a[1] and a[2] != b[2]})
events = sorted([(s, 1) for s, _, _ in faults] + [(e, -1) for _, e, _ in faults],
                key=lambda x: (x[0], x[1]))
active = most = 0
since = None
overlapping_ms = 0
for t, d in events:
    if active >= 2 and since is not None:
        overlapping_ms += t - since
    active += d
    most = max(most, active)
    since = t
print(len(faults), pairs, most, overlapping_ms, len(kinds))
PY
) || overlap="? ? ? ? ?"
  local logged pairs most overlapping_ms kind_pairs
  read -r logged pairs most overlapping_ms kind_pairs <<<"$overlap"
  if [[ "$pairs" =~ ^[0-9]+$ ]] && [ "$pairs" -ge 1 ] && [ "$most" -ge 2 ] && [ "$logged" = "$total_faults" ]; then
    pass "nemesis: faults overlapped: $pairs pairs of the $logged logged faults were under way together ($kind_pairs different pairs of kinds), up to $most at once, two or more for $(awk -v m="$overlapping_ms" 'BEGIN { printf "%.1f", m / 1000 }') s (faults.tsv)"
  else
    fail "nemesis: faults overlapped" "no moment with two faults under way at once, or a log that does not match the count: $logged faults logged for $total_faults injected, $pairs overlapping pairs, at most $most at once ($overlap)"
  fi
  # The producer's batches of 20 all reached the table (a refused one may have committed too),
  # counted after the drain: an enqueue under way when the producer stopped has finished by then.
  local producer_ok jobs_now
  producer_ok=$(grep -c ok "$sdir/producer.log" 2>/dev/null || true)
  jobs_now=$(q "SELECT count(*) FROM jobs" 2>/dev/null || echo 0)
  if [ "$producer_ok" -ge 1 ] && [ "$jobs_now" -ge $((initial + 20 * producer_ok)) ]; then
    pass "nemesis: $jobs_now jobs enqueued, at least the first $initial and the $producer_ok batches of 20 the database accepted along the way"
  else
    fail "nemesis: enqueue under the faults" "$jobs_now jobs for $initial + $producer_ok accepted batches of 20"
  fi
  local miss done_n seen_n
  read -r miss done_n seen_n <<<"$missing"
  if [ "$miss" = 0 ] && [ "$done_n" -gt 0 ]; then
    pass "nemesis: the consumer group got the verdict of every one of the $done_n completed jobs ($seen_n distinct verdicts read)"
  else
    fail "nemesis: consumer group complete" "$missing (missing, completed, read)"
  fi
  scenario_end
  $ha_mode || return 0
  # The failover drill's checks, on the final primary (drills/shared/drill_lib.sh): no fencing token
  # held twice, the claims after the last promotion in its timeline's range, and - the cluster's
  # replication is synchronous - no acknowledged completion lost. A promotion that none of the
  # cluster's faults made (a freeze past Patroni's ttl) is reported, not guessed at.
  local tl
  tl=$(q "SELECT aclaim_timeline()")
  if [ "$tl" != "$nem_timeline" ]; then
    fail "nemesis: promotions" "the final primary is on timeline $tl, the last fault of the cluster left it on $nem_timeline"
  fi
  fencing_checks nemesis "$nem_last_promotion"
  acknowledged_lost_check nemesis
  # What an operator runs after a failover that may have lost commits (drills/RUNBOOK.md, "The
  # primary failed", step 4): the survey, coordinators stopped. It must find nothing to quarantine
  # and nothing inconsistent; the drill never applies it, so nothing is normalized behind its back.
  local rc=0
  ctl recover >"$sdir/recover.txt" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    pass "nemesis: aclaimctl recover (dry run) on the final primary: nothing inconsistent, nothing quarantined ($(awk '$1 == "total" { printf "%s terminal, %s live, %s expired, %s pending, %s inconsistent", $2, $3, $4, $5, $6 }' "$sdir/recover.txt"))"
  else
    fail "nemesis: aclaimctl recover (dry run) on the final primary" "exit $rc: $(head -8 "$sdir/recover.txt" | paste -sd';' -)"
  fi
}

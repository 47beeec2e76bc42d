#!/usr/bin/env bash
# A producer of drills/upgrade: enqueues COUNT jobs every INTERVAL seconds with the given
# aclaimctl (the previous release's, then this one's), alternating between two queues, until
# SIGTERM, which it obeys between two enqueues. Each enqueue that fails is logged and counted, not
# retried: the drill reports how many failed, and the jobs that were enqueued are in `jobs`.
#
#   producer.sh ACLAIMCTL DSN ORG COUNT INTERVAL LOG
set -uo pipefail
ctl=$1 dsn=$2 org=$3 count=$4 interval=$5 log=$6
stop=false
trap 'stop=true' TERM INT
queues=(intake review)
i=0
while ! $stop; do
  queue=${queues[$((i % 2))]}
  if out=$(timeout -k 5 60 "$ctl" --dsn "$dsn" enqueue --org "$org" --count "$count" \
      --max-attempts 50 --queue "$queue" 2>&1); then
    echo "ok $(date +%s%3N) $queue $count" >>"$log"
  else
    echo "failed $(date +%s%3N) $queue: ${out//$'\n'/ }" >>"$log"
  fi
  i=$((i + 1))
  $stop || sleep "$interval" &
  wait $! 2>/dev/null || true
done
exit 0

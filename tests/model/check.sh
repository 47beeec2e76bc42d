#!/usr/bin/env bash
# Checks the protocol model exhaustively: the full model must verify with no error and a
# complete search, and every variant with one safeguard removed must leave a counterexample
# trail. Each run generates and compiles its own verifier in a temporary directory.
# Usage: tests/model/check.sh   (needs spin and a C compiler; exits non-zero on any deviation)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/aclaim.pml"
cc="${CC:-cc}"
memlim="${ACLAIM_MODEL_MEMLIM:-2000}"   # MB; a search that hits it is incomplete, so a failure

command -v spin >/dev/null || { echo "check.sh: spin not found" >&2; exit 2; }
command -v "$cc" >/dev/null || { echo "check.sh: C compiler '$cc' not found" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

# run NAME EXPECT MODE [SPIN_DEFINES...]
#   EXPECT: clean (verifies, search complete) or trail (an error with a trail file)
#   MODE:   safety (assertions) or live (acceptance cycles under weak fairness, the LTL claim)
run() {
  local name="$1" expect="$2" mode="$3"; shift 3
  local dir="$work/$name" out verdict
  mkdir -p "$dir"; cp "$model" "$dir/"
  local ccflags=(-O2 -w -DCOLLAPSE "-DMEMLIM=$memlim") panflags=(-m2000000)
  if [[ "$mode" == live ]]; then
    set -- -DLIVE "$@"; ccflags+=(-DNOREDUCE -DNFAIR=3); panflags+=(-a -f)
  else
    ccflags+=(-DSAFETY)
  fi
  local t0=$SECONDS
  if ! (cd "$dir" && spin -a "$@" aclaim.pml >spin.out 2>&1 && "$cc" "${ccflags[@]}" -o pan pan.c); then
    echo "FAIL $name: could not generate or compile the verifier"; cat "$dir/spin.out"
    failures=$((failures + 1)); return
  fi
  (cd "$dir" && ./pan "${panflags[@]}" >pan.out 2>&1) || true
  out="$dir/pan.out"
  local states errors depth elapsed mem
  states=$(awk '/states, stored/ {print $1; exit}' "$out")
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$out" | head -1)
  elapsed=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' "$out" | head -1)
  mem=$(awk '/total actual memory usage/ {print $1; exit}' "$out")
  local incomplete=""
  grep -qE 'max search depth too small|out of memory|search not completed|reached -DMEMLIM' "$out" \
    && incomplete=yes
  if [[ "$expect" == clean ]]; then
    if [[ "$errors" == 0 && -z "$incomplete" && ! -e "$dir/aclaim.pml.trail" ]]; then verdict=ok
    else verdict=FAIL; fi
  else
    if [[ -n "$errors" && "$errors" != 0 && -e "$dir/aclaim.pml.trail" ]]; then verdict=ok
    else verdict=FAIL; fi
  fi
  printf '%-4s %-22s expect %-5s states %10s depth %7s errors %s mem %7s MB pan %6ss wall %3ss\n' \
    "$verdict" "$name" "$expect" "${states:-?}" "${depth:-?}" "${errors:-?}" "${mem:-?}" \
    "${elapsed:-?}" "$((SECONDS - t0))"
  if [[ "$expect" == trail && "$verdict" == ok ]]; then
    # The violated assertion or cycle, as the trail replays it.
    (cd "$dir" && spin -t "$@" aclaim.pml 2>&1 | grep -E 'assertion violated|acceptance cycle|<<<<<START OF CYCLE' \
      | head -2 | sed 's/^/       trail: /') || true
  fi
  if [[ "$verdict" != ok ]]; then
    [[ -n "$incomplete" ]] && echo "       search incomplete (depth or memory bound reached)"
    grep -E 'assertion violated|error' "$out" | head -3 | sed 's/^/       /'
    failures=$((failures + 1))
  fi
}

# The fault classes are checked in separate runs at the smallest bounds that still exercise
# them: together their budgets multiply the state space past what an exhaustive run finishes.
# Every run keeps the core: 2 workers, 2 coalescing coordinators with skewed clocks, the reaper,
# one renewal, one release and one cancel. MAXATT=2 (a reclaimed job is claimed again) in the
# core runs; MAXATT=1 where a fault class is added.
none="-DLOSS=0 -DDUPS=0 -DREORDERS=0 -DEARLY=0 -DCRASHES=0 -DINDOUBT=0 -DFAILOVERS=0"
only() { local d="$none" f; for f in "$@"; do d="${d/-D$f=0/-D$f=1}"; done; echo "$d"; }

# shellcheck disable=SC2046
{
run core            clean safety $(only) -DMAXATT=2
run loss_early      clean safety $(only LOSS EARLY) -DMAXATT=1 -DL=1
run duplicate       clean safety $(only DUPS) -DMAXATT=1 -DL=1
run reorder         clean safety $(only REORDERS) -DMAXATT=1 -DL=1
run crash           clean safety $(only CRASHES) -DMAXATT=1 -DL=1
run in_doubt        clean safety $(only INDOUBT) -DMAXATT=1 -DL=1
run failover        clean safety $(only FAILOVERS) -DMAXATT=1 -DL=1
run liveness        clean live   $(only) -DMAXATT=1 -DL=1 -DRENEWS=0 -DRELEASES=0

run NO_GEN_BUMP        trail safety $(only) -DMAXATT=2 -DNO_GEN_BUMP
run NO_GEN_CHECK       trail safety $(only) -DMAXATT=2 -DNO_GEN_CHECK
run NO_RENEW_GEN_CHECK trail safety $(only) -DMAXATT=2 -DNO_RENEW_GEN_CHECK
run NO_EPOCH           trail safety $(only FAILOVERS) -DMAXATT=1 -DL=1 -DNO_EPOCH
}

echo "total ${SECONDS}s"
if (( failures > 0 )); then echo "check.sh: $failures run(s) deviated" >&2; exit 1; fi
echo "check.sh: the model verifies and every variant leaves a trail"

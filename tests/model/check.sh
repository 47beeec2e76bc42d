#!/usr/bin/env bash
# Checks the protocol model exhaustively: the full model must verify with no error and a
# complete search, and every variant with one safeguard removed must leave a counterexample trail
# that violates the property the variant is there to break (README.md's table), and no other
# check. Each run generates and compiles its own verifier in a temporary directory.
# Usage: tests/model/check.sh [RUN...]   (needs spin and a C compiler; with RUNs, only those;
#        exits non-zero on any deviation)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/aclaim.pml"
cc="${CC:-cc}"
memlim="${ACLAIM_MODEL_MEMLIM:-2000}"   # MB; a search that hits it is incomplete, so a failure

command -v spin >/dev/null || { echo "check.sh: spin not found" >&2; exit 2; }
command -v "$cc" >/dev/null || { echo "check.sh: C compiler '$cc' not found" >&2; exit 2; }

selected=" $* "
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
ran=0

# run NAME EXPECT MODE [SPIN_DEFINES...]
#   EXPECT: clean (verifies, search complete) or the property the run must violate, P1-P6: an
#           error with a trail whose replay shows that property violated, and no other. An
#           assertion is known by the tag on its line in aclaim.pml (/* P2 */); P6 is the LTL
#           claim `ends`, violated by an acceptance cycle.
#   MODE:   safety (assertions) or live (acceptance cycles under weak fairness, the LTL claim)
run() {
  local name="$1" expect="$2" mode="$3"; shift 3
  [[ "$selected" == "  " || "$selected" == *" $name "* ]] || return 0
  ran=$((ran + 1))
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
  local violated="" where=""
  if [[ -e "$dir/aclaim.pml.trail" ]]; then
    violated=$(violation "$dir" "$@")
    where=$(sed -n 's/^where \(.*\)/\1/p' <<<"$violated"); violated=$(head -1 <<<"$violated")
  fi
  if [[ "$expect" == clean ]]; then
    if [[ "$errors" == 0 && -z "$incomplete" && -z "$violated" ]]; then verdict=ok
    else verdict=FAIL; fi
  else
    if [[ -n "$errors" && "$errors" != 0 && "$violated" == "$expect" ]]; then verdict=ok
    else verdict=FAIL; fi
  fi
  printf '%-4s %-22s expect %-5s states %10s depth %7s errors %s mem %7s MB pan %6ss wall %3ss\n' \
    "$verdict" "$name" "$expect" "${states:-?}" "${depth:-?}" "${errors:-?}" "${mem:-?}" \
    "${elapsed:-?}" "$((SECONDS - t0))"
  [[ -z "$violated" ]] || echo "       trail violates ${violated}${where:+: $where}"
  if [[ "$verdict" != ok ]]; then
    [[ -n "$incomplete" ]] && echo "       search incomplete (depth or memory bound reached)"
    [[ "$expect" == clean || -n "$violated" ]] || echo "       no trail: the variant did not violate $expect"
    [[ "$expect" == clean || -z "$violated" || "$violated" == "$expect" ]] \
      || echo "       the variant must violate $expect, not ${violated}"
    grep -E '^pan:|errors:' "$out" | head -3 | sed 's/^/       /'
    failures=$((failures + 1))
  fi
}

# violation DIR [SPIN_DEFINES...]: replays DIR's trail and prints the property it violates (P1-P6,
# "bound" for a model bound, or what else pan found: "assertion at line N" without a tag, "invalid
# end state"), then "where FILE:LINE: the assertion's text" when it is an assertion.
violation() {
  local dir="$1"; shift
  local replay line text tag
  replay=$(cd "$dir" && spin -t "$@" aclaim.pml 2>&1) || true
  if grep -q 'acceptance cycle' "$dir/pan.out"; then
    # The only LTL claim in the model (ltl ends), which pan checks with -a.
    if grep -q '^ltl ends:' "$dir/pan.out" || grep -q '^ltl ends:' <<<"$replay"; then echo P6
    else echo "an acceptance cycle of no known claim"; fi
    return
  fi
  line=$(sed -n 's/^spin: aclaim\.pml:\([0-9]*\), Error: assertion violated$/\1/p' <<<"$replay" | head -1)
  if [[ -z "$line" ]]; then
    if grep -q 'invalid end state' "$dir/pan.out"; then echo "invalid end state"
    else echo "an error the replay does not name: $(grep -m1 '^pan:' "$dir/pan.out")"; fi
    return
  fi
  text=$(sed -n 's/^spin: text of failed assertion: //p' <<<"$replay" | head -1)
  tag=$(sed -n "${line}p" "$dir/aclaim.pml" | sed -n 's%.*/\* \(P[1-6]\|bound\)\b.*\*/.*%\1%p')
  echo "${tag:-an untagged assertion at line $line}"
  echo "where aclaim.pml:$line: $text"
}

# The fault classes are checked in separate runs at the smallest bounds that still exercise
# them: together their budgets multiply the state space past what an exhaustive run finishes.
# Every run keeps the core: 2 workers, 2 coalescing coordinators with skewed clocks, the reaper,
# one renewal, one release and one cancel. MAXATT=2 (a reclaimed job is claimed again) in the
# core runs; MAXATT=1 where a fault class is added.
none="-DLOSS=0 -DDUPS=0 -DREORDERS=0 -DEARLY=0 -DCRASHES=0 -DINDOUBT=0 -DFAILOVERS=0 -DRESTARTS=0"
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
run restart         clean safety $(only RESTARTS) -DMAXATT=2 -DL=1 -DRENEWS=0 -DRELEASES=0
run liveness        clean live   $(only) -DMAXATT=1 -DL=1 -DRENEWS=0 -DRELEASES=0

# Each variant in the configuration of the run that covers its fault, and the one property it
# must violate. NO_GEN_BUMP leaves out renewals and releases so that the first stale request the
# search meets is a completion (a stale renewal would violate P4 first).
run NO_STATE_FENCE       P1 safety $(only DUPS) -DMAXATT=1 -DL=1 -DNO_STATE_FENCE
run NO_GEN_BUMP          P2 safety $(only RESTARTS) -DMAXATT=2 -DL=1 -DRENEWS=0 -DRELEASES=0 -DNO_GEN_BUMP
run NO_GEN_CHECK         P2 safety $(only) -DMAXATT=2 -DNO_GEN_CHECK
run NO_EPOCH             P3 safety $(only FAILOVERS) -DMAXATT=1 -DL=1 -DNO_EPOCH
run NO_RENEW_GEN_CHECK   P4 safety $(only) -DMAXATT=2 -DNO_RENEW_GEN_CHECK
run NO_COMMIT_RESOLUTION P5 safety $(only INDOUBT) -DMAXATT=1 -DL=1 -DNO_COMMIT_RESOLUTION
run NO_REAP              P6 live   $(only) -DMAXATT=1 -DL=1 -DRENEWS=0 -DRELEASES=0 -DNO_REAP
}

echo "total ${SECONDS}s"
if (( ran == 0 )); then echo "check.sh: no run is named${selected% }" >&2; exit 2; fi
if (( failures > 0 )); then echo "check.sh: $failures run(s) deviated" >&2; exit 1; fi
echo "check.sh: the model verifies, and every variant violates its own property and no other"

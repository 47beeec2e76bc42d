# shellcheck shell=bash
# CURVE for the drills, sourced by drills/demo, faults, recovery, bench and canary: the keys a
# deployment uses (docs/security.md), made the way an operator makes them, with `aclaimctl keys`.
#
#   curve_setup BIN KEYDIR    decide CURVE or plaintext once per drill; with CURVE, generate the
#                             coordinator's key pair into KEYDIR (coordinator.key, 0600)
#   curve_worker NAME ORG [DSN]
#                             with CURVE, generate a key pair for worker NAME into KEYDIR and
#                             register it for organization ORG in the database at DSN (default
#                             ACLAIM_DSN); the worker must say HELLO with NAME
#   drill_plaintext           true when the drills are asked to run without CURVE
#
# After curve_setup:
#   curve_on                  true or false (a command, usable as `if $curve_on`)
#   curve_label               "CURVE" or "plaintext", for the drill's output
#   curve_server_pub          the coordinator's public key (Z85); empty in plaintext
#   curve_coordinator_args    flags for aclaim-coordinator: the secret key file, or --plaintext
# After curve_worker:
#   curve_worker_args         flags for aclaim-worker: server key and the worker's public key
#   curve_worker_secret       the worker's secret key (Z85). Hand it over in the environment,
#                             `ACLAIM_CURVE_SECRET_KEY=$curve_worker_secret aclaim-worker ...`,
#                             never in argv, where ps shows it; never export it (the coordinator
#                             reads the same variable and refuses a key from two places)
#
# ACLAIM_DRILL_PLAINTEXT=1 runs every drill without CURVE, for a quick local look or to measure
# without encryption; ACLAIM_DEMO_PLAINTEXT=1 is the older name of the same switch.

drill_plaintext() {
  [ "${ACLAIM_DRILL_PLAINTEXT:-0}" = 1 ] || [ "${ACLAIM_DEMO_PLAINTEXT:-0}" = 1 ]
}

# Bounded, like every step of a drill: a database that does not answer fails the step.
curve_ctl() { timeout -k 5 60 "$curve_bin/aclaimctl" "$@"; }

curve_setup() {  # curve_setup BIN KEYDIR
  curve_bin=$1
  curve_keydir=$2
  curve_worker_args=()
  curve_worker_secret=""
  if drill_plaintext; then
    curve_on=false
    curve_label=plaintext
    curve_server_pub=""
    curve_coordinator_args=(--plaintext)
    return 0
  fi
  # The drill's flags say everything: settings inherited from the caller's environment must not
  # turn the coordinator to plaintext or give it a second secret.
  unset ACLAIM_PLAINTEXT ACLAIM_CURVE_SECRET_KEY ACLAIM_CURVE_SECRET_KEY_FILE \
    ACLAIM_CURVE_SERVER_KEY ACLAIM_CURVE_PUBLIC_KEY
  mkdir -p "$curve_keydir"
  chmod 700 "$curve_keydir"
  # keys generate refuses to write over a file: the drill's own earlier pair goes first.
  rm -f "$curve_keydir/coordinator.key" "$curve_keydir/coordinator.pub"
  curve_server_pub=$(curve_ctl keys generate --server --out-dir "$curve_keydir" 2>/dev/null) ||
    { echo "curve: aclaimctl keys generate --server failed" >&2; return 1; }
  curve_on=true
  curve_label=CURVE
  curve_coordinator_args=(--curve-secret-key-file "$curve_keydir/coordinator.key")
}

curve_worker() {  # curve_worker NAME ORG [DSN]
  local name=$1 org=$2 dsn=${3:-${ACLAIM_DSN:-}}
  curve_worker_args=()
  curve_worker_secret=""
  $curve_on || return 0
  local pub
  # A name an earlier scenario of the drill used gets a new pair, as an operator replacing a
  # worker's key would: the old files go first, since keys generate refuses to write over them.
  rm -f "$curve_keydir/$name.key" "$curve_keydir/$name.pub"
  pub=$(curve_ctl keys generate --name "$name" --out-dir "$curve_keydir" 2>/dev/null) ||
    { echo "curve: aclaimctl keys generate --name $name failed" >&2; return 1; }
  curve_ctl ${dsn:+--dsn "$dsn"} keys register --org "$org" --name "$name" \
    --public-key="$pub" >/dev/null ||
    { echo "curve: aclaimctl keys register --org $org --name $name failed" >&2; return 1; }
  # Keys go as --option=KEY: a Z85 key may begin with "-", which a separate argument would turn
  # into what looks like an option.
  curve_worker_args=(--curve-server-key="$curve_server_pub" --curve-public-key="$pub")
  curve_worker_secret=$(cat "$curve_keydir/$name.key")
}

#!/usr/bin/env bash
# Common helpers for the local real-server scripts (etcd, Kafka, FerretDB).
# Sourced, never run. Every script keeps downloads/builds under $JOBSCHED_CACHE (reused across runs)
# and per-run state (data dirs, pid files, logs) under $JOBSCHED_RUN_DIR.
set -euo pipefail

JOBSCHED_CACHE="${JOBSCHED_CACHE:-$HOME/.cache/jobsched}"
JOBSCHED_RUN_DIR="${JOBSCHED_RUN_DIR:-$JOBSCHED_CACHE/run}"
LOCAL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOCAL_DIR/../.." && pwd)"
mkdir -p "$JOBSCHED_CACHE" "$JOBSCHED_RUN_DIR"

log() { printf '[%s] %s\n' "${SERVER_NAME:-local}" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${SERVER_NAME:-local}" "$*" >&2; exit 1; }

# Under pipefail a pipe into a reader that stops early (`grep -q`, `head`) fails whenever the writer is still
# writing when the reader exits: the writer dies of SIGPIPE and the pipeline's status is its 141, match or not.
# These helpers read everything first (tests/deployments/test_local_scripts.py refuses such pipes).

# output_has TEXT CMD...: true when CMD's output (stdout and stderr) contains TEXT; CMD's own status is ignored.
output_has() {
  local text="$1" out; shift
  out="$("$@" 2>&1)" || true
  [[ "$out" == *"$text"* ]]
}

# cmdline_has PID TEXT: true when process PID is alive and its command line contains TEXT.
cmdline_has() {
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *"$2"* ]]
}

# first_lines N: the first N lines of stdin, read to its end (unlike head, so the writer never meets SIGPIPE).
first_lines() { awk -v n="$1" 'NR <= n'; }

# require_cmd CMD HINT: fail with a precise message when a prerequisite is missing.
require_cmd() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found: $2"; }

# apt_install PKG...: install Debian packages once (root only); `apt-get update` only when needed.
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "need root to apt-get install ${missing[*]} (or install them yourself)"
  log "apt-get install ${missing[*]}"
  # The lock timeout lets several scripts install at once (make test starts them in parallel).
  local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)
  if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >/dev/null
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

pid_file() { echo "$JOBSCHED_RUN_DIR/$1.pid"; }
log_file() { echo "$JOBSCHED_RUN_DIR/$1.log"; }

# is_running NAME: true when the pid recorded for NAME is alive.
is_running() {
  local f; f="$(pid_file "$1")"
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# start_bg NAME CMD...: start CMD detached in its own session, output to the NAME log, pid recorded.
start_bg() {
  local name="$1"; shift
  local lf; lf="$(log_file "$name")"
  : >"$lf"
  setsid "$@" >>"$lf" 2>&1 < /dev/null &
  echo $! >"$(pid_file "$name")"
}

# wait_ready NAME TIMEOUT_S CHECK...: poll CHECK until it succeeds; on timeout or early death show the log.
wait_ready() {
  local name="$1" timeout="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! is_running "$name"; then
      tail -n 40 "$(log_file "$name")" >&2 || true
      die "$name exited during start-up (log: $(log_file "$name"))"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$(log_file "$name")" >&2 || true
      die "$name not ready after ${timeout}s (log: $(log_file "$name"))"
    fi
    sleep 0.2
  done
}

# stop_bg NAME: SIGTERM the process group, escalate to SIGKILL after 15 s.
stop_bg() {
  local name="$1" f pid
  f="$(pid_file "$name")"
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# tcp_open HOST PORT: true when something accepts connections there.
tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# port_pid PORT: the pid of the process listening on TCP PORT (empty when it cannot be found out).
port_pid() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | first_lines 1
}

# port_holder PORT: "pid N (command line)" of the process listening on PORT, for error messages.
port_holder() {
  local pid; pid="$(port_pid "$1")"
  if [ -n "$pid" ]; then
    echo "pid $pid ($(tr '\0\n' '  ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120 | sed 's/ *$//'))"
  else
    echo "another process"
  fi
}

# refuse_taken_port HOST PORT WHAT VARIABLE: die naming the holder when something already listens there.
refuse_taken_port() {
  tcp_open "$1" "$2" || return 0
  die "port $1:$2 ($3) is in use by $(port_holder "$2"); stop it or set $4"
}

# run_command VERB: the standard server verbs call the script's cmd_<verb>; anything else prints its usage.
run_command() {
  [ $# -eq 1 ] || usage
  case "$1" in
    install | start | stop | status | clean | env) "cmd_$1" ;;
    *) usage ;;
  esac
}

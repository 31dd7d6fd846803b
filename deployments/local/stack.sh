#!/usr/bin/env bash
# The whole distributed stack on this machine, as real processes (what docker compose runs, without Docker).
#
#   stack.sh up       start etcd, Kafka and FerretDB (servers.sh start), then the API, two schedulers, one
#                     executor per registered job type (plug-ins of JOBSCHED_HANDLERS and entry points
#                     included) and the reaper; return once every one of them is ready:
#                     API /readyz 200, every /healthz 200, one scheduler reporting scheduler_is_leader 1
#   stack.sh down     stop exactly what `up` started (pid files, each pid's command line verified), then the
#                     servers that `up` had to start (servers that were already running are left alone)
#   stack.sh status   one line per component; exit 0 when every one is running and healthy
#   stack.sh targets  `<service> 127.0.0.1:<metrics port> <name>` per component (what prometheus.sh scrapes)
#   stack.sh env      the exports that point the tools at this stack (MONGO_URI, KAFKA_BROKERS, ETCD_ENDPOINTS,
#                     JOBSCHED_API_URL, ...): `eval "$(bash stack.sh env)"`. `up` writes them to $STACK_DIR/env,
#                     which seed and loadtest read by themselves when their environment does not set them
#
# AUTH=required (and AUTH_BOOTSTRAP_KEY, AUTH_REFRESH, ...) pass through to the API like every other variable:
# the hints printed by `up` then show how to create a key with `jobsched keys` and send it.
# Ports: the API on API_PORT (8080); metrics (/metrics, /healthz) on a block from STACK_METRICS_PORT (9100):
# api +0, scheduler-1 +1, scheduler-2 +2, one executor per job type in name order from +3, the reaper last.
# State: STACK_DIR (default $JOBSCHED_RUN_DIR/stack) holds <name>.log, <name>.pid and `components`, the list
# `up` wrote and `down` reads. Every other jobsched variable (MONGO_DB, KAFKA_TOPIC_PREFIX, ELECTION_KEY,
# SCHEDULER_TICK, REAPER_INTERVAL, ...) passes through from the caller's environment, so a second stack with
# its own STACK_DIR, ports, database, topic prefix and election key runs beside the first (the e2e test does).
# shellcheck disable=SC2034 # SERVER_NAME is read by log/die in lib.sh
SERVER_NAME=stack
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SERVERS_RUN_DIR="$JOBSCHED_RUN_DIR"   # the servers keep their own state where servers.sh always keeps it
STACK_DIR="${STACK_DIR:-$JOBSCHED_RUN_DIR/stack}"
API_PORT="${API_PORT:-8080}"
STACK_METRICS_PORT="${STACK_METRICS_PORT:-9100}"
READY_TIMEOUT_S="${STACK_READY_TIMEOUT_S:-90}"
VENV_PY="$REPO_ROOT/.venv/bin/python"
MANIFEST="$STACK_DIR/components"
ENV_FILE="$STACK_DIR/env"
SERVERS_STARTED="$STACK_DIR/servers.started"
SERVERS=(etcd kafka ferretdb)

mkdir -p "$STACK_DIR"
# lib.sh's pid_file/log_file/start_bg/stop_bg read JOBSCHED_RUN_DIR at call time: point them at the stack.
JOBSCHED_RUN_DIR="$STACK_DIR"

usage() {
  echo "usage: $0 up|down|status|targets|env" >&2
  awk 'NR > 1 && /^# shellcheck/ { exit } NR > 1 && /^#/ { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2
  exit 2
}

server_script() { JOBSCHED_RUN_DIR="$SERVERS_RUN_DIR" bash "$LOCAL_DIR/$1" "${@:2}"; }

http_ok() { curl -sf --max-time 2 -o /dev/null "$1"; }

# Manifest lines: NAME SERVICE METRICS_PORT [ARGS...]
read_manifest() { [ -f "$MANIFEST" ] && grep -v '^#' "$MANIFEST"; }

# our_pid NAME SERVICE ARGS...: the recorded pid when it is alive AND runs `-m services.SERVICE ARGS` (a stale
# pid file may name a recycled pid that belongs to something else, which must never be signalled).
our_pid() {
  local name="$1" service="$2"; shift 2
  local f pid want
  f="$(pid_file "$name")"
  [ -f "$f" ] || return 1
  pid="$(cat "$f" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  want="-m services.$service${*:+ $*}"
  [ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | sed 's/ $//')" = "$VENV_PY $want" ] || return 1
  echo "$pid"
}

# healthy NAME SERVICE METRICS_PORT: /healthz on the metrics port; for the API also /readyz (store reachable,
# indexes created) on the API port.
healthy() {
  local service="$2" port="$3"
  if [ "$service" = api ]; then
    http_ok "http://127.0.0.1:$API_PORT/readyz" || return 1
  fi
  http_ok "http://127.0.0.1:$port/healthz"
}

leader_port() {
  local name service port
  while read -r name service port _; do
    [ "$service" = scheduler ] || continue
    if output_has $'\nscheduler_is_leader 1' curl -sf --max-time 2 "http://127.0.0.1:$port/metrics"; then
      echo "$port"
      return 0
    fi
  done < <(read_manifest)
  return 1
}

write_manifest() {
  local types port=$STACK_METRICS_PORT
  # The built-ins and the types of the plug-ins named by JOBSCHED_HANDLERS or installed with an entry point
  # (with PYTHONPATH, if they are not installed); the executors get the same environment.
  types="$(cd "$REPO_ROOT" && "$VENV_PY" -m shared.handlers.plugins)" ||
    die "could not load the handlers with $VENV_PY (run: make install; see the message above)"
  {
    echo "# NAME SERVICE METRICS_PORT ARGS (written by stack.sh up, read by down/status/targets)"
    echo "api api $port"; port=$((port + 1))
    echo "scheduler-1 scheduler $port"; port=$((port + 1))
    echo "scheduler-2 scheduler $port"; port=$((port + 1))
    for t in $types; do echo "executor-$t executor $port --type $t"; port=$((port + 1)); done
    echo "reaper reaper $port"
  } >"$MANIFEST"
}

stop_components() {
  local name service port args pids=()
  while read -r name service port args; do
    # shellcheck disable=SC2086 # args is a word list on purpose
    if our_pid "$name" "$service" $args >/dev/null; then
      stop_bg "$name" & pids+=($!)
    else
      local f; f="$(pid_file "$name")"
      if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
        log "$name: pid $(cat "$f") is not our $service process (recycled pid?); left alone"
      fi
      rm -f "$f"
    fi
  done < <(read_manifest)
  for p in "${pids[@]}"; do wait "$p" || true; done
}

stop_servers() {
  [ -f "$SERVERS_STARTED" ] || return 0
  local s pids=() ours=()
  read -r -a ours <"$SERVERS_STARTED" || true
  for s in "${ours[@]}"; do server_script "$s.sh" stop & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || true; done
  rm -f "$SERVERS_STARTED"
}

cmd_up() {
  local started=$SECONDS name service port args
  require_cmd curl "stack.sh polls /readyz and /healthz with curl (Debian: apt-get install curl)"
  [ -x "$VENV_PY" ] || die "no $VENV_PY: run 'make install' first"
  if [ -f "$MANIFEST" ]; then
    if cmd_status >/dev/null; then
      log "already up ($STACK_DIR); 'stack.sh down' first to restart"
      return 0
    fi
    while read -r name service port args; do
      # shellcheck disable=SC2086
      our_pid "$name" "$service" $args >/dev/null && die "partly running ($name is up): run 'stack.sh down' first"
    done < <(read_manifest)
  fi

  write_manifest
  while read -r name service port args; do
    refuse_taken_port 127.0.0.1 "$port" "$name metrics" STACK_METRICS_PORT
  done < <(read_manifest)
  refuse_taken_port 127.0.0.1 "$API_PORT" API API_PORT

  # Servers: remember which ones this `up` starts, so `down` stops those and nothing else.
  local s missing=()
  for s in "${SERVERS[@]}"; do server_script "$s.sh" status >/dev/null 2>&1 || missing+=("$s"); done
  echo "${missing[*]}" >"$SERVERS_STARTED"
  server_script servers.sh start || { stop_servers; die "the servers did not start"; }
  eval "$(server_script servers.sh env)"
  export MONGO_URI KAFKA_BROKERS ETCD_ENDPOINTS

  # From here a failure stops everything this call started.
  trap 'log "start-up failed; stopping what was started"; stop_components; stop_servers; rm -f "$MANIFEST" "$ENV_FILE"' EXIT
  cd "$REPO_ROOT" || die "no $REPO_ROOT"
  # Nudges (a job due now is claimed at once): each scheduler takes UDP datagrams on the number of its metrics
  # port (UDP and TCP ports are apart), and the API (a job created due) and the executors (a job others waited
  # for ended) send to both.
  local nudge_targets="127.0.0.1:$((STACK_METRICS_PORT + 1)),127.0.0.1:$((STACK_METRICS_PORT + 2))"
  while read -r name service port args; do
    local nudge=()
    [ "$service" = scheduler ] && nudge=(NUDGE_LISTEN="127.0.0.1:$port")
    [ "$service" = api ] || [ "$service" = executor ] && nudge=(NUDGE_TARGETS="$nudge_targets")
    # shellcheck disable=SC2086
    start_bg "$name" env API_HOST=127.0.0.1 API_PORT="$API_PORT" METRICS_PORT="$port" "${nudge[@]}" \
      LOG_LEVEL="${LOG_LEVEL:-INFO}" "$VENV_PY" -m "services.$service" $args
  done < <(read_manifest)
  while read -r name service port args; do
    wait_ready "$name" "$READY_TIMEOUT_S" healthy "$name" "$service" "$port"
  done < <(read_manifest)
  wait_ready scheduler-1 "$READY_TIMEOUT_S" leader_port
  write_env_file
  trap - EXIT

  local leader; leader="$(leader_port)"
  log "up in $((SECONDS - started))s: $(grep -vc '^#' "$MANIFEST") processes, leader on metrics port $leader"
  local auth_header=""
  if [ "${AUTH:-}" = required ]; then
    auth_header=" -H \"Authorization: Bearer \$KEY\""
    cat >&2 <<EOF
  keys:     AUTH=required: KEY=\$(MONGO_URI='$MONGO_URI' MONGO_DB=${MONGO_DB:-jobsched} \\
              $REPO_ROOT/.venv/bin/jobsched keys create --tenant tenant-a --role writer)
EOF
  fi
  cat >&2 <<EOF
  logs:     $STACK_DIR/*.log
  metrics:  http://127.0.0.1:<port>/metrics, ports in $MANIFEST (bash $0 status)
  try:      curl -s -X POST http://127.0.0.1:$API_PORT/jobs -H 'Content-Type: application/json'$auth_header \\
              -d '{"idempotencyKey":"hello-$(date +%s)","tenantId":"tenant-a","jobType":"log-message",
                   "payload":{"message":"hello"},"scheduledAt":"$(date -u +%FT%TZ)"}'
            curl -s 'http://127.0.0.1:$API_PORT/jobs?tenantId=tenant-a'$auth_header
  stop:     make down   (or bash $0 down)
  tools:    seed and loadtest find this stack by themselves (they read $ENV_FILE); for anything else:
$(sed 's/^/            /' "$ENV_FILE")
EOF
}

# The settings that point a tool at this stack; a variable the caller passed through is written as it was.
write_env_file() {
  {
    echo "export MONGO_URI=$MONGO_URI"
    echo "export MONGO_DB=${MONGO_DB:-jobsched}"
    echo "export KAFKA_BROKERS=$KAFKA_BROKERS"
    if [ -n "${KAFKA_TOPIC_PREFIX:-}" ]; then echo "export KAFKA_TOPIC_PREFIX=$KAFKA_TOPIC_PREFIX"; fi
    echo "export ETCD_ENDPOINTS=$ETCD_ENDPOINTS"
    echo "export JOBSCHED_API_URL=http://127.0.0.1:$API_PORT"
  } >"$ENV_FILE"
}

cmd_env() {
  [ -f "$ENV_FILE" ] || die "stack not up (no $ENV_FILE)"
  cat "$ENV_FILE"
}

cmd_down() {
  local started=$SECONDS
  stop_components
  stop_servers
  rm -f "$MANIFEST" "$ENV_FILE"
  log "down in $((SECONDS - started))s"
}

cmd_status() {
  [ -f "$MANIFEST" ] || { echo "stack not up (no $MANIFEST)"; return 1; }
  local name service port args pid ok=0 state
  while read -r name service port args; do
    # shellcheck disable=SC2086
    if ! pid="$(our_pid "$name" "$service" $args)"; then
      state="not running"; ok=1
    elif healthy "$name" "$service" "$port"; then
      state="ready (pid $pid)"
    else
      state="NOT ready (pid $pid)"; ok=1
    fi
    printf '%-22s metrics :%-5s %s\n' "$name" "$port" "$state"
  done < <(read_manifest)
  local leader
  if leader="$(leader_port)"; then echo "leader: scheduler on metrics port $leader"; else echo "leader: none"; ok=1; fi
  echo "api: http://127.0.0.1:$API_PORT   logs: $STACK_DIR/*.log"
  return $ok
}

cmd_targets() {
  [ -f "$MANIFEST" ] || die "stack not up (no $MANIFEST)"
  local name service port
  while read -r name service port _; do echo "$service 127.0.0.1:$port $name"; done < <(read_manifest)
}

[ $# -eq 1 ] || usage
case "$1" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  targets) cmd_targets ;;
  env) cmd_env ;;
  *) usage ;;
esac

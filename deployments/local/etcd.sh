#!/usr/bin/env bash
# Local single-node etcd 3.4 (Debian package `etcd-server`) on loopback, for dev and integration tests.
#
#   etcd.sh install   apt-get install etcd-server unless `etcd` is already on PATH
#   etcd.sh start     install if needed, start (no-op when already running and healthy), wait for /health
#   etcd.sh stop      stop the instance started by this script
#   etcd.sh status    exit 0 when running and healthy
#   etcd.sh clean     stop and delete the data dir
#   etcd.sh env       print `export ETCD_ENDPOINTS=127.0.0.1:<port>`
#
# Ports: ETCD_PORT (client, default 23790) and ETCD_PEER_PORT (peer, default 23800). The non-default ports keep
# clear of a packaged instance on 2379/2380.
SERVER_NAME=etcd
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ETCD_HOST=127.0.0.1
ETCD_PORT="${ETCD_PORT:-23790}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-23800}"
ETCD_NAME=jobsched-local
ETCD_DIR="$JOBSCHED_RUN_DIR/etcd"
ETCD_DATA_DIR="$ETCD_DIR/data"
CLIENT_URL="http://$ETCD_HOST:$ETCD_PORT"
PEER_URL="http://$ETCD_HOST:$ETCD_PEER_PORT"

usage() {
  echo "usage: $0 {install|start|stop|status|clean|env}" >&2
  exit 2
}

# http_ok URL: true on a 2xx answer (curl, or python3 when curl is missing).
http_ok() {
  if command -v curl >/dev/null 2>&1; then
    curl -sf --max-time 2 "$1" >/dev/null
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" >/dev/null 2>&1
  else
    die "need curl or python3 for the health check"
  fi
}

healthy() { http_ok "$CLIENT_URL/health"; }

# our_pid: print the recorded pid when it is alive AND is an etcd process (a stale pid file may point at a
# recycled pid that belongs to something else, which must never be signalled).
our_pid() {
  local f pid
  f="$(pid_file etcd)"
  [ -f "$f" ] || return 1
  pid="$(cat "$f" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  is_running etcd || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = etcd ] || return 1
  echo "$pid"
}

drop_stale_pid_file() {
  local f
  f="$(pid_file etcd)"
  if [ -f "$f" ] && ! our_pid >/dev/null; then
    log "removing stale pid file $f (pid $(cat "$f" 2>/dev/null || echo '?') is not a live etcd)"
    rm -f "$f"
  fi
}

cmd_install() {
  if command -v etcd >/dev/null 2>&1; then
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "'etcd' not on PATH and no apt-get: install etcd 3.4 yourself (Debian/Ubuntu package etcd-server)"
  local default_was_open=0
  if tcp_open 127.0.0.1 2379; then default_was_open=1; fi
  apt_install etcd-server
  command -v etcd >/dev/null 2>&1 || die "etcd-server installed but 'etcd' is not on PATH (expected /usr/bin/etcd)"
  log "installed $(etcd --version 2>/dev/null | first_lines 1)"
  # The package ships etcd.service and /etc/init.d/etcd, and its postinst starts the default instance
  # (127.0.0.1:2379/2380, data /var/lib/etcd/default) unless policy-rc.d forbids it (Docker-style images ship
  # one that does) or there is no init. It does not clash with our ports, but don't leave a stray server behind.
  if [ "$default_was_open" -eq 0 ] && tcp_open 127.0.0.1 2379; then
    log "the package started its default etcd on 127.0.0.1:2379; stopping it" \
      "(to keep it off at boot: systemctl disable etcd, or update-rc.d etcd disable)"
    if [ -d /run/systemd/system ]; then
      systemctl stop etcd.service || true
    elif [ -x /etc/init.d/etcd ]; then
      /etc/init.d/etcd stop || true
    fi
  fi
}

cmd_start() {
  command -v etcd >/dev/null 2>&1 || cmd_install
  mkdir -p "$ETCD_DIR"
  # Serialise concurrent `start` calls (parallel test runners); the lock fd is closed for the etcd child.
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$ETCD_DIR/start.lock"
    flock -w 60 9 || die "timed out waiting for another 'etcd.sh start' ($ETCD_DIR/start.lock)"
  fi

  local pid
  if pid="$(our_pid)"; then
    if healthy; then
      log "already running (pid $pid, $CLIENT_URL)"
      return 0
    fi
    log "pid $pid alive but not healthy yet; waiting"
    wait_ready etcd 30 healthy
    log "ready (pid $pid, $CLIENT_URL)"
    return 0
  fi
  drop_stale_pid_file

  refuse_taken_port "$ETCD_HOST" "$ETCD_PORT" "etcd client" ETCD_PORT
  refuse_taken_port "$ETCD_HOST" "$ETCD_PEER_PORT" "etcd peer" ETCD_PEER_PORT

  # etcd reads every ETCD_<FLAG> environment variable as a flag (and warns about unknown ones such as our own
  # ETCD_PORT / ETCD_ENDPOINTS), so start it with none: the command line below is the whole configuration.
  local unset_env=() v
  for v in $(compgen -e); do
    if [[ "$v" == ETCD_* ]]; then unset_env+=(-u "$v"); fi
  done
  # etcd creates the data dir itself (mode 0700); only its parent is made here.
  start_bg etcd env "${unset_env[@]}" etcd \
    --name "$ETCD_NAME" \
    --data-dir "$ETCD_DATA_DIR" \
    --listen-client-urls "$CLIENT_URL" --advertise-client-urls "$CLIENT_URL" \
    --listen-peer-urls "$PEER_URL" --initial-advertise-peer-urls "$PEER_URL" \
    --initial-cluster "$ETCD_NAME=$PEER_URL" --initial-cluster-state new \
    --logger zap --log-level warn 9>&-
  wait_ready etcd 30 healthy
  log "ready (pid $(cat "$(pid_file etcd)"), $CLIENT_URL, data $ETCD_DATA_DIR, log $(log_file etcd))"
}

cmd_stop() {
  drop_stale_pid_file
  local pid
  if pid="$(our_pid)"; then
    stop_bg etcd
    log "stopped (pid $pid)"
  else
    log "not running"
  fi
}

cmd_status() {
  local pid
  if pid="$(our_pid)" && healthy; then
    echo "etcd running: pid $pid, $CLIENT_URL, data $ETCD_DATA_DIR"
    return 0
  fi
  if [ -n "${pid:-}" ]; then
    echo "etcd pid $pid alive but $CLIENT_URL/health is not OK (log: $(log_file etcd))"
  elif tcp_open "$ETCD_HOST" "$ETCD_PORT"; then
    echo "etcd not running (from this script), but $ETCD_HOST:$ETCD_PORT is open: another process?"
  else
    echo "etcd not running"
  fi
  return 1
}

cmd_clean() {
  cmd_stop
  rm -rf "$ETCD_DATA_DIR"
  log "removed $ETCD_DATA_DIR"
}

cmd_env() { echo "export ETCD_ENDPOINTS=$ETCD_HOST:$ETCD_PORT"; }

run_command "$@"

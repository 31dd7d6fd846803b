#!/usr/bin/env bash
# FerretDB 2 (MongoDB wire protocol) on PostgreSQL 15 with DocumentDB, on loopback: the MongoDB-compatible
# database that `make test` and `make up` run the MongoDB store on (docs/ferretdb.md).
#
#   ferretdb.sh install|start|stop|status|clean|env
#
# Environment:
#   FERRETDB_PORT     listen port on 127.0.0.1 (default 27018)
#   POSTGRES_PORT     port of the private PostgreSQL cluster (documentdb.sh; default 15432)
#
# The binary is built from the Go module proxy (`go install` of the pinned version below, which verifies every
# dependency against FerretDB's own go.sum) and cached at $JOBSCHED_CACHE/ferretdb/<hash of version + Go>/.
# PostgreSQL and the extension are documentdb.sh's; `start` builds both at once and `stop` stops both.
# shellcheck disable=SC2034 # SERVER_NAME is read by log/die in lib.sh
SERVER_NAME=ferretdb
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FDB_PORT="${FERRETDB_PORT:-27018}"
PG_PORT="${POSTGRES_PORT:-15432}"
FDB_MODULE=github.com/FerretDB/FerretDB/v2
FDB_VERSION=v2.7.0
FDB_RUN="$JOBSCHED_RUN_DIR/ferretdb"
VENV_PY="$REPO_ROOT/.venv/bin/python"
DOCUMENTDB_SH="$LOCAL_DIR/documentdb.sh"

usage() {
  echo "usage: $0 install|start|stop|status|clean|env" >&2
  exit 2
}

mongo_uri() { echo "mongodb://127.0.0.1:$FDB_PORT/?directConnection=true"; }

now_ms() { date +%s%3N; }

# ---------------------------------------------------------------------------------------------- build
find_go() {
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then PATH="$PATH:/usr/local/go/bin"; fi
  require_cmd go "install Go >= 1.24 (e.g. under /usr/local/go) to build FerretDB from the Go module proxy"
}

ferretdb_bin() {
  find_go
  local key; key="$(echo "$FDB_MODULE@$FDB_VERSION $(go env GOVERSION)" | sha256sum | cut -c1-16)"
  echo "$JOBSCHED_CACHE/ferretdb/$key/ferretdb"
}

build_ferretdb() {
  local bin; bin="$(ferretdb_bin)"
  [ -x "$bin" ] && return 0
  mkdir -p "$JOBSCHED_CACHE/ferretdb"
  (
    # One build at a time; a second caller waits and then finds the binary.
    exec 9>"$JOBSCHED_CACHE/ferretdb/build.lock"
    flock 9
    [ -x "$bin" ] && exit 0
    local tmp t0
    tmp="$(mktemp -d "$JOBSCHED_CACHE/ferretdb/build.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    t0="$(now_ms)"
    log "building FerretDB $FDB_VERSION (Go $(go env GOVERSION)) -> $bin"
    # No build tags: the default build is the production one. Pure Go, so no C toolchain is involved.
    GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice go install -p 2 -trimpath \
      "$FDB_MODULE/cmd/ferretdb@$FDB_VERSION" >"$tmp/build.log" 2>&1 ||
      { cat "$tmp/build.log" >&2; die "go install $FDB_MODULE/cmd/ferretdb@$FDB_VERSION failed (Go module proxy reachable?)"; }
    output_has "version: $FDB_VERSION" "$tmp/ferretdb" --version ||
      die "the built binary does not report version $FDB_VERSION: $("$tmp/ferretdb" --version 2>&1 | first_lines 3)"
    mkdir -p "$(dirname "$bin")"
    mv -f "$tmp/ferretdb" "$bin"
    log "built FerretDB $FDB_VERSION in $(( ($(now_ms) - t0) / 1000 ))s"
  )
}

# The Go build and the extension build at once: each alone leaves a core idle much of the time.
cmd_install() {
  local docdb
  bash "$DOCUMENTDB_SH" install & docdb=$!
  build_ferretdb || { wait "$docdb" || true; exit 1; }
  wait "$docdb" || die "documentdb.sh install failed"
}

# ---------------------------------------------------------------------------------------------- server
# A real check: pymongo `ping` (FerretDB's ping also asks PostgreSQL), else a TCP check.
ferretdb_ready() {
  tcp_open 127.0.0.1 "$FDB_PORT" || return 1
  [ -x "$VENV_PY" ] || return 0
  "$VENV_PY" - "$(mongo_uri)" <<'EOF'
import sys

import pymongo

client = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=1000, connectTimeoutMS=1000)
try:
    client.admin.command("ping")
finally:
    client.close()
EOF
}

ferretdb_up() { is_running ferretdb && tcp_open 127.0.0.1 "$FDB_PORT"; }

cmd_start() {
  if ferretdb_up && bash "$DOCUMENTDB_SH" status >/dev/null 2>&1; then
    log "already running (pid $(cat "$(pid_file ferretdb)"), $(mongo_uri))"
    return 0
  fi
  is_running ferretdb && { log "pid alive but not serving: restarting"; stop_bg ferretdb; }
  refuse_taken_port 127.0.0.1 "$FDB_PORT" ferretdb FERRETDB_PORT
  local docdb
  bash "$DOCUMENTDB_SH" start & docdb=$!
  build_ferretdb || { wait "$docdb" || true; exit 1; }
  wait "$docdb" || die "PostgreSQL with DocumentDB did not start (log: $(log_file documentdb))"
  local t0; t0="$(now_ms)"
  mkdir -p "$FDB_RUN/state"
  start_bg ferretdb env DO_NOT_TRACK=1 "$(ferretdb_bin)" \
    --postgresql-url="postgres://postgres@127.0.0.1:$PG_PORT/postgres" --listen-addr="127.0.0.1:$FDB_PORT" \
    --no-auth --debug-addr=- --state-dir="$FDB_RUN/state" --telemetry=disable --log-level=warn
  wait_ready ferretdb 60 ferretdb_ready
  log "ready in $(( $(now_ms) - t0 )) ms (FerretDB $FDB_VERSION, pid $(cat "$(pid_file ferretdb)"), $(mongo_uri))"
}

cmd_stop() {
  stop_bg ferretdb
  bash "$DOCUMENTDB_SH" stop
}

cmd_status() {
  if ferretdb_up; then
    log "running (pid $(cat "$(pid_file ferretdb)"), $(mongo_uri))"
    return 0
  fi
  log "not running"
  return 1
}

cmd_clean() {
  stop_bg ferretdb
  bash "$DOCUMENTDB_SH" clean
  rm -rf "$FDB_RUN"
  log "removed $FDB_RUN"
}

cmd_env() { echo "export MONGO_URI=$(mongo_uri)"; }

run_command "$@"

#!/usr/bin/env bash
# FerretDB 1.24 (MongoDB wire protocol) on loopback, as the local stand-in for MongoDB.
#
#   ferretdb.sh install|start|stop|status|clean|env
#
# Environment:
#   FERRETDB_PORT     listen port on 127.0.0.1 (default 27018)
#   FERRETDB_BACKEND  sqlite | postgresql (default postgresql: faster claims, see docs/stand-in.md)
#   FERRETDB_GOGC     the Go garbage collector target of the FerretDB process (default 400, see cmd_start)
#   POSTGRES_PORT     port of the private PostgreSQL cluster for the postgresql backend (default 15432: every
#                     fixed port of the project lies below Linux's ephemeral range 32768-60999, where any
#                     outgoing connection may hold a port for a moment)
#
# The binary is built from the Go module proxy via the tools module in ./ferretdb (go.mod + go.sum) and cached
# at $JOBSCHED_CACHE/ferretdb/<hash of go.mod+go.sum>/ferretdb. Data lives under $JOBSCHED_RUN_DIR/ferretdb/.
# shellcheck disable=SC2034 # SERVER_NAME is read by log/die in lib.sh
SERVER_NAME=ferretdb
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FDB_PORT="${FERRETDB_PORT:-27018}"
FDB_BACKEND="${FERRETDB_BACKEND:-postgresql}"
PG_PORT="${POSTGRES_PORT:-15432}"
MOD_DIR="$LOCAL_DIR/ferretdb"
FDB_RUN="$JOBSCHED_RUN_DIR/ferretdb"
VENV_PY="$REPO_ROOT/.venv/bin/python"
PG_NAME=postgres   # start_bg/stop_bg name of the PostgreSQL server (pid file, log)
FDB_PKG=github.com/FerretDB/FerretDB

mongo_uri() { echo "mongodb://127.0.0.1:$FDB_PORT/?directConnection=true"; }

now_ms() { date +%s%3N; }

# ---------------------------------------------------------------------------------------------- build
build_key() { cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" | sha256sum | cut -c1-16; }
ferretdb_bin() { echo "$JOBSCHED_CACHE/ferretdb/$(build_key)/ferretdb"; }

# Why not `go build github.com/FerretDB/FerretDB/cmd/ferretdb` straight from the tools module: the Go linker
# records the module of the *main package* as debug.BuildInfo.Main, i.e. github.com/FerretDB/FerretDB, so
# build/version's init() demands build/version/version.txt (git-ignored upstream, absent from the proxy zip)
# and panics. We therefore copy the module source out of the module cache (overlays beneath GOMODCACHE are
# refused), write version.txt, and build it through a `replace` in a throw-away copy of the tools module.
cmd_install() {
  local bin; bin="$(ferretdb_bin)"
  [ -x "$bin" ] && return 0
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then PATH="$PATH:/usr/local/go/bin"; fi
  require_cmd go "install Go >= 1.24 (e.g. under /usr/local/go) to build FerretDB from the Go module proxy"
  mkdir -p "$JOBSCHED_CACHE/ferretdb"
  (
    # One build at a time; a second caller waits and then finds the binary.
    exec 9>"$JOBSCHED_CACHE/ferretdb/build.lock"
    flock 9
    [ -x "$bin" ] && exit 0
    local tmp t0 src ver
    tmp="$(mktemp -d "$JOBSCHED_CACHE/ferretdb/build.XXXXXX")"
    trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
    t0="$(now_ms)"
    log "building FerretDB (tools module $MOD_DIR, Go $(go env GOVERSION)) -> $bin"
    cp "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$tmp/"
    cd "$tmp" || exit 1
    go mod download "$FDB_PKG" || die "go mod download $FDB_PKG failed (is the Go module proxy reachable?)"
    read -r src ver < <(go list -m -f '{{.Dir}} {{.Version}}' "$FDB_PKG")
    { [ -d "$src" ] && [ -n "$ver" ]; } || die "could not locate $FDB_PKG in the module cache"
    cp -R "$src" "$tmp/FerretDB"
    chmod -R u+w "$tmp/FerretDB"
    echo "$ver" >"$tmp/FerretDB/build/version/version.txt"
    go mod edit -replace "$FDB_PKG=./FerretDB"
    if ! CGO_ENABLED=0 go build -trimpath -o "$tmp/ferretdb" "$FDB_PKG/cmd/ferretdb" 2>"$tmp/build.err"; then
      if grep -q linkname "$tmp/build.err"; then
        log "linker refused a //go:linkname; retrying with -ldflags=-checklinkname=0"
        CGO_ENABLED=0 go build -trimpath -ldflags=-checklinkname=0 -o "$tmp/ferretdb" "$FDB_PKG/cmd/ferretdb" \
          || die "go build failed"
      else
        cat "$tmp/build.err" >&2
        die "go build failed"
      fi
    fi
    "$tmp/ferretdb" --version | grep -q "^version: $ver\$" || die "built binary does not report version $ver"
    mkdir -p "$(dirname "$bin")"
    mv -f "$tmp/ferretdb" "$bin"
    log "built FerretDB $ver in $(( ($(now_ms) - t0) / 1000 ))s"
  )
}

# ---------------------------------------------------------------------------------------------- postgres
PG_BIN=""
PG_DATA=""

pg_find_bin() {
  local d
  d="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1)"
  if [ -z "$d" ] || [ ! -x "$d/postgres" ]; then
    apt_install postgresql
    d="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1)"
  fi
  { [ -n "$d" ] && [ -x "$d/postgres" ]; } || die "PostgreSQL server binaries not found under /usr/lib/postgresql"
  PG_BIN="$d"
  require_cmd runuser "util-linux runuser is needed to run PostgreSQL as the postgres user"
  getent passwd postgres >/dev/null || die "no 'postgres' system user (Debian package postgresql creates it)"
}

# The data dir is $FDB_RUN/pg. PostgreSQL runs as `postgres`, which must be able to reach it; when an ancestor
# is closed to it (the default cache is under /root, mode 0700) the cluster lives under the postgres user's
# home instead and $FDB_RUN/pg is a symlink to it. Nothing's permissions are changed.
pg_resolve_data() {
  local link="$FDB_RUN/pg" home target
  mkdir -p "$FDB_RUN"
  if [ -L "$link" ]; then
    PG_DATA="$(readlink "$link")"
  elif [ -d "$link" ] || runuser -u postgres -- test -x "$FDB_RUN" 2>/dev/null; then
    PG_DATA="$link"
  else
    home="$(getent passwd postgres | cut -d: -f6)"
    target="$home/jobsched/$(echo "$FDB_RUN" | sha256sum | cut -c1-12)/pg"
    runuser -u postgres -- test -x "$home" 2>/dev/null || die "postgres user can reach neither $FDB_RUN nor $home"
    ln -s "$target" "$link"
    log "postgres cannot reach $FDB_RUN (closed parent dir); cluster lives in $target (symlinked as $link)"
    PG_DATA="$target"
  fi
  mkdir -p "$PG_DATA"
  chown postgres:postgres "$PG_DATA"
  chmod 700 "$PG_DATA"
}

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres; }
pg_psql() { PGCONNECT_TIMEOUT=5 "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"; }

pg_start() {
  pg_find_bin
  if is_running "$PG_NAME" && pg_ready; then return 0; fi
  is_running "$PG_NAME" && stop_bg "$PG_NAME"
  refuse_taken_port 127.0.0.1 "$PG_PORT" postgresql POSTGRES_PORT
  pg_resolve_data
  local major; major="$("$PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)[.].*/\1/')"
  if [ -f "$PG_DATA/PG_VERSION" ] && [ "$(cat "$PG_DATA/PG_VERSION")" != "$major" ]; then
    die "cluster in $PG_DATA is PostgreSQL $(cat "$PG_DATA/PG_VERSION"), server is $major: run '$0 clean'"
  fi
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    find "$PG_DATA" -mindepth 1 -delete   # leftovers of an interrupted initdb
    log "initdb $PG_DATA (PostgreSQL $major)"
    (cd / && runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C --no-sync >/dev/null)
  fi
  # Test server: fsync/synchronous_commit/full_page_writes off trade crash safety for speed. TCP on loopback only.
  # Autovacuum as job queues on PostgreSQL tune it (every job document is rewritten ~3 times and FerretDB scans
  # whole tables, so dead rows slow every query): a 15,000-job drain ran at 223.6 / 247.0 jobs/s with the
  # defaults and 247.7-271.6 jobs/s (4 runs) with these.
  (cd / && start_bg "$PG_NAME" runuser -u postgres -- "$PG_BIN/postgres" -D "$PG_DATA" -p "$PG_PORT" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories= \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
    -c autovacuum_naptime=1s -c autovacuum_vacuum_cost_delay=0 \
    -c autovacuum_vacuum_scale_factor=0.05 -c autovacuum_vacuum_insert_scale_factor=0.05)
  wait_ready "$PG_NAME" 60 pg_ready
  if [ "$(pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'ferretdb'")" != 1 ]; then
    pg_psql -d postgres -c "CREATE DATABASE ferretdb"
  fi
  # GIN indexes that FerretDB 1.x's pushed-down equalities can use (why and which: the file's header)
  pg_psql -d ferretdb -f "$LOCAL_DIR/ferretdb-pg-indexes.sql" >/dev/null
}

pg_stop() {
  [ -f "$(pid_file "$PG_NAME")" ] || return 0
  if is_running "$PG_NAME"; then
    pg_find_bin
    pg_resolve_data
    (cd / && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" stop -m fast -w -t 30 >/dev/null 2>&1) || true
  fi
  stop_bg "$PG_NAME"
}

# ---------------------------------------------------------------------------------------------- ferretdb
# A real check: pymongo `ping` (FerretDB's ping also asks the backend for its status), else a TCP check.
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
  case "$FDB_BACKEND" in sqlite | postgresql) ;; *) die "FERRETDB_BACKEND must be sqlite or postgresql, not '$FDB_BACKEND'" ;; esac
  if ferretdb_up; then
    local running; running="$(cat "$FDB_RUN/backend" 2>/dev/null || echo unknown)"
    [ "$running" = "$FDB_BACKEND" ] || log "WARNING: already running with backend '$running', not '$FDB_BACKEND' (stop first)"
    log "already running (pid $(cat "$(pid_file ferretdb)"), $(mongo_uri))"
    return 0
  fi
  is_running ferretdb && { log "pid alive but port $FDB_PORT closed: restarting"; stop_bg ferretdb; }
  refuse_taken_port 127.0.0.1 "$FDB_PORT" ferretdb FERRETDB_PORT
  cmd_install
  local bin t0 args=()
  bin="$(ferretdb_bin)"
  t0="$(now_ms)"
  mkdir -p "$FDB_RUN"
  case "$FDB_BACKEND" in
    sqlite)
      mkdir -p "$FDB_RUN/sqlite"
      args=(--handler=sqlite "--sqlite-url=file:$FDB_RUN/sqlite/")
      ;;
    postgresql)
      pg_start
      args=(--handler=postgresql "--postgresql-url=postgres://postgres@127.0.0.1:$PG_PORT/ferretdb")
      ;;
  esac
  echo "$FDB_BACKEND" >"$FDB_RUN/backend"
  # GOGC 400 (Go's default is 100): FerretDB allocates a fresh decoded document for every row a query returns,
  # and its garbage collector took ~12 % of its CPU (pprof). At 400 a 10,000-job drain cost FerretDB 37-39 s of
  # CPU instead of 45-50 s (same-hour runs), with the resident set still under 100 MB after the run.
  start_bg ferretdb env DO_NOT_TRACK=1 GOGC="${FERRETDB_GOGC:-400}" "$bin" "${args[@]}" --listen-addr="127.0.0.1:$FDB_PORT" \
    --debug-addr=- --state-dir=- --telemetry=disable --log-level=warn
  wait_ready ferretdb 60 ferretdb_ready
  log "ready in $(( $(now_ms) - t0 )) ms ($FDB_BACKEND backend, pid $(cat "$(pid_file ferretdb)"), $(mongo_uri))"
}

cmd_stop() {
  stop_bg ferretdb
  pg_stop
}

cmd_status() {
  if ferretdb_up; then
    log "running (pid $(cat "$(pid_file ferretdb)"), backend $(cat "$FDB_RUN/backend" 2>/dev/null || echo unknown), $(mongo_uri))"
    return 0
  fi
  log "not running"
  return 1
}

cmd_clean() {
  cmd_stop
  local link="$FDB_RUN/pg"
  if [ -L "$link" ]; then
    local target; target="$(readlink "$link")"
    rm -rf "$target"
    rmdir "$(dirname "$target")" "$(dirname "$(dirname "$target")")" 2>/dev/null || true
  fi
  rm -rf "$FDB_RUN"
  log "removed $FDB_RUN"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  clean) cmd_clean ;;
  env) echo "export MONGO_URI=$(mongo_uri)" ;;
  *) echo "usage: $0 install|start|stop|status|clean|env" >&2; exit 2 ;;
esac

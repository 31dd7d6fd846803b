#!/usr/bin/env bash
# PostgreSQL 15 with Microsoft's DocumentDB extension on loopback: the storage engine under FerretDB 2
# (ferretdb.sh starts it; it is no use on its own).
#
#   documentdb.sh install   apt-get the PostgreSQL 15 server and the build's tools, build DocumentDB as its own
#                           scripts do (against libbson 1.28.0, static; with RUM, pg_cron and pgvector, which it
#                           requires) from the tarballs in ./vendor (sha256-checked) and install them into
#                           PostgreSQL 15
#   documentdb.sh start     install if needed, initdb on first start, start, CREATE EXTENSION documentdb
#   documentdb.sh stop|status|clean|env
#   documentdb.sh settings  DocumentDB's server settings as postgresql.conf lines (for the production image)
#   documentdb.sh create-sql  the CREATE EXTENSION statements a new cluster needs (for the production image)
#
# Environment: POSTGRES_PORT (default 15432: every fixed port of the project lies below Linux's ephemeral
# range 32768-60999, where any outgoing connection may hold a port for a moment), RUM_VERSION (1.3.15, the
# default, or 1.3.14), DOCUMENTDB_RUM (below), POSTGRES_DURABLE (1: fsync and synchronous_commit on, as in
# production), POSTGRES_BIN (another PostgreSQL 15's bin directory, e.g. a copy made to run two builds side by
# side; default Debian's), JOBSCHED_CACHE / JOBSCHED_RUN_DIR (lib.sh). The built source trees are cached at
# $JOBSCHED_CACHE/documentdb/<key>/, the key a hash of the tarballs, the recipe below and the PostgreSQL major
# version; a stamp in PostgreSQL's extension dir says which key is installed, so a later run installs nothing.
# Data lives under $JOBSCHED_RUN_DIR/documentdb/.
# shellcheck disable=SC2034 # SERVER_NAME is read by log/die in lib.sh
SERVER_NAME=documentdb
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_MAJOR=15
PG_BIN="${POSTGRES_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}"
PG_CONFIG="$PG_BIN/pg_config"
PG_PORT="${POSTGRES_PORT:-15432}"
PG_NAME=documentdb   # start_bg/stop_bg name of the server (pid file, log)
LEGACY_PG_NAME=postgres   # FerretDB 1.x's PostgreSQL, as earlier versions of ferretdb.sh started it
DOCDB_RUN="$JOBSCHED_RUN_DIR/documentdb"
VENDOR="$LOCAL_DIR/vendor"
# tarball, its sha256, the directory it unpacks to (vendor/README.md: upstream refs and licenses). libbson is
# the version DocumentDB's scripts/setup_versions.sh pins (the tarball holds libbson's part of the C driver).
LIBBSON_DIR=mongo-c-driver-1.28.0
SOURCES=(
  "mongo-c-driver-1.28.0-libbson.tar.gz 6b81eeb297247beac69f1dd4b21b63d6a78557138ae367f563f4ba8a63774d2d mongo-c-driver-1.28.0"
  "pg_cron-1.6.3.tar.gz 3580f4034021e62e459f9f7ab1f625774bfc534a9256844545da85d6f99c2f5b pg_cron-1.6.3"
  "pgvector-0.8.0.tar.gz 93df40ccdaaaa267d1275c1e6e773004a0e5ff8e14227934a4ec7e8205d0f608 pgvector-0.8.0"
  "documentdb-microsoft-b2e220c4.tar.gz 65bc74c46a3ad178d2119fc2daecde36aaf8feda352af34fccd60b0d6e28e8f6 documentdb-b2e220c4"
)
# RUM, the index access method under DocumentDB's indexes. 1.3.15 is the first release with upstream 78c348b
# ("Fix corruption when entry->buffer changed to nonleaf while unlocked": a crash when a concurrent insert
# splits a page during a scan, a plausible cause, not proven, of the crashes and the corrupted RUM index seen
# here); DocumentDB pins 1.3.14, which RUM_VERSION=1.3.14 builds instead, to compare the two.
RUM_VERSION="${RUM_VERSION:-1.3.15}"
RUM_SOURCES=(
  "rum-1.3.14.tar.gz 7bdd441d67151448b83dbed4afd794839baaadd72cc3fb4f226847386399860c rum-1.3.14"
  "rum-1.3.15.tar.gz 674d7f8b969b98e89a9c36d93e62cff2b321184c740b897e687574a96274c858 rum-1.3.15"
)
RUM_DIR=""
for rum_entry in "${RUM_SOURCES[@]}"; do
  if [ "${rum_entry%% *}" = "rum-$RUM_VERSION.tar.gz" ]; then SOURCES+=("$rum_entry"); RUM_DIR="rum-$RUM_VERSION"; fi
done
[ -n "$RUM_DIR" ] || die "RUM_VERSION=$RUM_VERSION: vendored are 1.3.15 (the default) and 1.3.14"
# Debian 12's packages for the server, DocumentDB's other required extension (postgis) and the build.
# systemtap-sdt-dev: Debian's PostgreSQL is built with DTrace probes, and RUM's sources include their header
# (sys/sdt.h).
APT_PACKAGES=(
  "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" "postgresql-$PG_MAJOR-postgis-3"
  libpcre2-dev libintelrdfpmath-dev libkrb5-dev systemtap-sdt-dev gcc make cmake pkg-config
)
# Each build's arguments; part of the cache key. libbson's are DocumentDB's (scripts/install_setup_libbson.sh:
# -fPIC -g, Release) for libbson alone (the tarball has no libmongoc) and its static library only: DocumentDB
# links libbson-static-1.0, so a shared one would be built for nothing. with_llvm=no: no clang bitcode (clang is
# not installed). RUM's USE_PGXS=1 is how DocumentDB's scripts/install_setup_rum_oss.sh builds it. pgvector's
# OPTFLAGS="" leaves out -march=native, so the build runs on any x86-64.
CMAKE_LIBBSON=(-DENABLE_MONGOC=OFF -DENABLE_TESTS=OFF -DENABLE_EXAMPLES=OFF -DENABLE_SHARED=OFF
  "-DCMAKE_C_FLAGS=-fPIC -g" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_LIBDIR=lib)
MAKE_PG_CRON=(with_llvm=no)
MAKE_PGVECTOR=(with_llvm=no OPTFLAGS=)
MAKE_RUM=(USE_PGXS=1 with_llvm=no)
MAKE_DOCDB_CORE=(with_llvm=no)
MAKE_DOCDB=(with_llvm=no)
MAKE_DOCDB_RUM=(with_llvm=no)
# FerretDB 2's own server settings for DocumentDB (its packaging's preload script), plus cron's database.
# shellcheck disable=SC2054 # the commas are inside one setting's value
DOCDB_SETTINGS=(
  shared_preload_libraries=pg_cron,pg_documentdb_core,pg_documentdb cron.database_name=postgres
  documentdb.enableCompact=true documentdb.enableLetAndCollationForQueryMatch=true
  documentdb.enableNowSystemVariable=true documentdb.enableSortbyIdPushDownToPrimaryKey=true
  documentdb.enableSchemaValidation=true documentdb.enableBypassDocumentValidation=true
  documentdb.enableUserCrud=true documentdb.maxUserLimit=100
)
# Which RUM code serves DocumentDB's indexes. `extended` (the default): DocumentDB's own fork of RUM
# (internal/pg_documentdb_extended_rum, built and installed by its Makefile beside the other two; same pages on
# disk), whose scan finds the leaf again when a concurrent insert has split the page it was reading. Upstream
# RUM gets that race wrong in both releases: 1.3.14 reads the split page as a leaf (the crashes and the
# corrupted index seen on Debian's 1.3.13), 1.3.15 returns without moving on and its callers spin forever
# (docs/ferretdb.md, "The soak"). `upstream`: RUM $RUM_VERSION, as FerretDB's packages load it.
DOCUMENTDB_RUM="${DOCUMENTDB_RUM:-extended}"
case "$DOCUMENTDB_RUM" in
  extended) DOCDB_SETTINGS+=(documentdb.rum_library_load_option=require_documentdb_extended_rum) ;;
  upstream) ;;
  *) die "DOCUMENTDB_RUM=$DOCUMENTDB_RUM: extended (the default) or upstream" ;;
esac

# create_extensions_sql: what a new cluster needs created in `postgres`. With DocumentDB's RUM loaded, its
# extension too: DocumentDB looks its access method up on every query and, when it is missing, logs a warning
# each time (700,000 lines an hour under a soak) without caching the miss.
create_extensions_sql() {
  echo "CREATE EXTENSION IF NOT EXISTS documentdb CASCADE;"
  [ "$DOCUMENTDB_RUM" = extended ] && echo "CREATE EXTENSION IF NOT EXISTS documentdb_extended_rum;"
  return 0
}

usage() {
  echo "usage: $0 install|start|stop|status|clean|env|settings|create-sql" >&2
  exit 2
}

now_ms() { date +%s%3N; }

# ---------------------------------------------------------------------------------------------- build
build_key() {
  {
    printf '%s\n' "${SOURCES[@]}" "$PG_MAJOR" "${CMAKE_LIBBSON[*]}" "${MAKE_PG_CRON[*]}" "${MAKE_PGVECTOR[*]}" \
      "${MAKE_RUM[*]}" "${MAKE_DOCDB_CORE[*]}" "${MAKE_DOCDB[*]}" "${MAKE_DOCDB_RUM[*]}"
  } | sha256sum | cut -c1-16
}

ext_dir() { echo "$("$PG_CONFIG" --sharedir)/extension"; }
stamp_file() { echo "$(ext_dir)/jobsched-documentdb.stamp"; }
installed() {
  [ -x "$PG_CONFIG" ] && [ -f "$(ext_dir)/documentdb.control" ] && [ "$(cat "$(stamp_file)" 2>/dev/null)" = "$(build_key)" ]
}

# Debian ships no pkg-config file for the Intel decimal library; DocumentDB's build asks pkg-config for it.
write_intelmathlib_pc() {
  mkdir -p "$1"
  cat >"$1/intelmathlib.pc" <<PC
prefix=/usr
libdir=/usr/lib/$(gcc -print-multiarch)
includedir=/usr/include
Name: intelmathlib
Description: Intel decimal floating-point math library (Debian libintelrdfpmath-dev)
Version: 2.0u2
Cflags: -I\${includedir}
Libs: -L\${libdir} -lbidgcc000
PC
}

# make_install DIR ARGS...: build (what is not built yet) and install one PGXS tree, niced, two jobs (the
# machines have two cores); output to $BUILD_LOG.
make_install() {
  local dir="$1"; shift
  nice make -s -j2 -C "$dir" PG_CONFIG="$PG_CONFIG" "$@" install >>"$BUILD_LOG" 2>&1 ||
    { tail -n 30 "$BUILD_LOG" >&2; die "make install in $dir failed (log: $BUILD_LOG)"; }
}

# build_libbson ROOT: build libbson and install it into ROOT/libbson, a prefix of its own inside the cached tree
# (not /usr, where Debian's libbson may be), niced, two jobs; output to $BUILD_LOG. Only DocumentDB's build
# reads it: the extensions link it statically.
build_libbson() {
  local src="$1/$LIBBSON_DIR" prefix="$1/libbson"
  { nice cmake -S "$src" -B "$src/_build" -DCMAKE_INSTALL_PREFIX="$prefix" "${CMAKE_LIBBSON[@]}" &&
    nice cmake --build "$src/_build" -j 2 && cmake --install "$src/_build"; } >>"$BUILD_LOG" 2>&1 ||
    { tail -n 30 "$BUILD_LOG" >&2; die "building libbson in $src failed (log: $BUILD_LOG)"; }
  # The tree is built in a temporary directory and then moved into the cache: a prefix relative to the .pc
  # file's own place stays right after the move (for a later install from the cache).
  sed -i "s|^prefix=.*|prefix=\${pcfiledir}/../..|" "$prefix/lib/pkgconfig/libbson-static-1.0.pc"
}

# install_trees ROOT: build (when not built yet) and install the PGXS trees; DocumentDB loads RUM at run time
# and its own build reads the core extension's installed headers, so each tree is installed before the next is
# built. DocumentDB's Makefile.cflags asks pkg-config for libbson-static-1.0 (ROOT's own build), the Intel
# decimal library and PCRE2.
install_trees() {
  local root="$1" docdb="$1/documentdb-b2e220c4"
  export PKG_CONFIG_PATH="$root/libbson/lib/pkgconfig:$root/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  BUILD_LOG="$root/build.log"
  make_install "$root/pg_cron-1.6.3" "${MAKE_PG_CRON[@]}"
  make_install "$root/pgvector-0.8.0" "${MAKE_PGVECTOR[@]}"
  make_install "$root/$RUM_DIR" "${MAKE_RUM[@]}"
  make_install "$docdb/pg_documentdb_core" "${MAKE_DOCDB_CORE[@]}"
  make_install "$docdb/pg_documentdb" "${MAKE_DOCDB[@]}"
  make_install "$docdb/internal/pg_documentdb_extended_rum" "${MAKE_DOCDB_RUM[@]}"
}

# remove_debian_package PKG WHY: apt-get remove PKG when installed (it owns files of the same names as a build).
remove_debian_package() {
  dpkg -s "$1" >/dev/null 2>&1 || return 0
  log "removing Debian's $1 ($2)"
  apt-get -o DPkg::Lock::Timeout=300 -y -q remove "$1" >/dev/null
}

cmd_install() {
  if ! installed; then apt_install "${APT_PACKAGES[@]}"; fi
  installed && return 0
  [ "$(id -u)" -eq 0 ] || die "need root to install the extensions into PostgreSQL $PG_MAJOR ($(ext_dir))"
  # Debian's pg_cron 1.4.2 cannot be created with DocumentDB ("invalid schedule: 2 seconds"), and its RUM is
  # 1.3.13; both own the files the builds install.
  remove_debian_package "postgresql-$PG_MAJOR-cron" "DocumentDB fails with its pg_cron; 1.6.3 is built instead"
  remove_debian_package "postgresql-$PG_MAJOR-rum" "its RUM is 1.3.13; $RUM_DIR is built instead"
  local key cache tree
  key="$(build_key)"
  cache="$JOBSCHED_CACHE/documentdb"
  tree="$cache/$key"
  mkdir -p "$cache"
  (
    # One build at a time; a second caller waits, then finds it installed.
    exec 9>"$cache/build.lock"
    flock 9
    installed && exit 0
    local t0; t0="$(now_ms)"
    if [ ! -f "$tree/.built" ]; then
      local tmp entry file sum dir
      tmp="$(mktemp -d "$cache/build.XXXXXX")"
      trap 'rm -rf "$tmp"' EXIT
      log "building libbson, DocumentDB, $RUM_DIR, pg_cron and pgvector for PostgreSQL $PG_MAJOR -> $tree"
      for entry in "${SOURCES[@]}"; do
        read -r file sum dir <<<"$entry"
        echo "$sum  $VENDOR/$file" | sha256sum -c --quiet - || die "checksum mismatch: $VENDOR/$file"
        tar -xzf "$VENDOR/$file" -C "$tmp"
        [ -d "$tmp/$dir" ] || die "$file did not unpack to $dir"
      done
      write_intelmathlib_pc "$tmp/pkgconfig"
      BUILD_LOG="$tmp/build.log"
      build_libbson "$tmp"
      install_trees "$tmp"
      touch "$tmp/.built"
      rm -rf "$tree"
      mv "$tmp" "$tree"
      trap - EXIT
    else
      log "installing the cached build $tree"
      install_trees "$tree"
    fi
    echo "$key" >"$(stamp_file)"
    log "DocumentDB installed in $(( ($(now_ms) - t0) / 1000 ))s"
  )
}

# ---------------------------------------------------------------------------------------------- cluster
PG_DATA=""

# The data dir is $DOCDB_RUN/pg. PostgreSQL runs as `postgres`, which must be able to reach it; when an
# ancestor is closed to it (the default cache is under /root, mode 0700) the cluster lives under the postgres
# user's home instead and $DOCDB_RUN/pg is a symlink to it. Nothing's permissions are changed.
pg_resolve_data() {
  local link="$DOCDB_RUN/pg" home target
  require_cmd runuser "util-linux runuser is needed to run PostgreSQL as the postgres user"
  getent passwd postgres >/dev/null || die "no 'postgres' system user (Debian package postgresql-$PG_MAJOR creates it)"
  mkdir -p "$DOCDB_RUN"
  if [ -L "$link" ]; then
    PG_DATA="$(readlink "$link")"
  elif [ -d "$link" ] || runuser -u postgres -- test -x "$DOCDB_RUN" 2>/dev/null; then
    PG_DATA="$link"
  else
    home="$(getent passwd postgres | cut -d: -f6)"
    target="$home/jobsched/$(echo "$DOCDB_RUN" | sha256sum | cut -c1-12)/pg"
    runuser -u postgres -- test -x "$home" 2>/dev/null || die "postgres user can reach neither $DOCDB_RUN nor $home"
    ln -s "$target" "$link"
    log "postgres cannot reach $DOCDB_RUN (closed parent dir); cluster lives in $target (symlinked as $link)"
    PG_DATA="$target"
  fi
  mkdir -p "$PG_DATA"
  chown postgres:postgres "$PG_DATA"
  chmod 700 "$PG_DATA"
}

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres; }
pg_psql() { PGCONNECT_TIMEOUT=5 "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"; }
pg_up() { is_running "$PG_NAME" && pg_ready; }

cmd_start() {
  if pg_up; then
    log "already running (pid $(cat "$(pid_file "$PG_NAME")"), 127.0.0.1:$PG_PORT)"
    return 0
  fi
  is_running "$PG_NAME" && stop_bg "$PG_NAME"
  stop_legacy
  refuse_taken_port 127.0.0.1 "$PG_PORT" postgresql POSTGRES_PORT
  cmd_install
  local t0; t0="$(now_ms)"
  pg_resolve_data
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    find "$PG_DATA" -mindepth 1 -delete   # leftovers of an interrupted initdb
    log "initdb $PG_DATA (PostgreSQL $PG_MAJOR)"
    (cd / && runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C --no-sync >/dev/null)
  fi
  [ "$(cat "$PG_DATA/PG_VERSION")" = "$PG_MAJOR" ] ||
    die "cluster in $PG_DATA is PostgreSQL $(cat "$PG_DATA/PG_VERSION"), not $PG_MAJOR: run '$0 clean'"
  local settings=() s
  for s in "${DOCDB_SETTINGS[@]}"; do settings+=(-c "$s"); done
  # Test server: fsync/synchronous_commit/full_page_writes off trade crash safety for speed; POSTGRES_DURABLE=1
  # keeps PostgreSQL's defaults, as production does (docs/ferretdb.md says what they cost). TCP on loopback only.
  local speed_ups=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
  [ "${POSTGRES_DURABLE:-0}" = 1 ] && speed_ups=()
  (cd / && start_bg "$PG_NAME" runuser -u postgres -- "$PG_BIN/postgres" -D "$PG_DATA" -p "$PG_PORT" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories= \
    "${speed_ups[@]}" -c max_connections=300 "${settings[@]}")
  wait_ready "$PG_NAME" 60 pg_ready
  pg_psql -d postgres -c "SET client_min_messages = warning; $(create_extensions_sql)"
  log "ready in $(( $(now_ms) - t0 )) ms (pid $(cat "$(pid_file "$PG_NAME")"), 127.0.0.1:$PG_PORT, data $PG_DATA)"
}

# FerretDB 1.x's PostgreSQL, when an earlier ferretdb.sh left it running in this run dir (it holds the port).
stop_legacy() {
  is_running "$LEGACY_PG_NAME" || return 0
  log "stopping FerretDB 1.x's PostgreSQL (pid $(cat "$(pid_file "$LEGACY_PG_NAME")")), started by an earlier ferretdb.sh"
  stop_bg "$LEGACY_PG_NAME"
}

pg_ctl_stop() { (cd / && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" stop -m "$1" -w -t "$2" >/dev/null 2>&1); }

# kill_leftover_backends PID...: SIGKILL those of PIDS that are still PostgreSQL processes. Backends run in
# sessions of their own, so stop_bg's kill of the server's process group misses them; one that never reads its
# signals (a scan looping inside an index) would outlive the server, spinning and holding its locks.
kill_leftover_backends() {
  local pid
  for pid in "$@"; do
    [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = postgres ] || continue
    log "killing PostgreSQL process $pid, still running after the server stopped"
    kill -KILL "$pid" 2>/dev/null || true
  done
}

# A fast shutdown ends every session; when one does not end in 30 s, an immediate one (SIGQUIT, which a
# backend obeys at once: crash recovery at the next start), then whatever is left is killed.
cmd_stop() {
  stop_legacy
  [ -f "$(pid_file "$PG_NAME")" ] || return 0
  local backends=()
  if is_running "$PG_NAME"; then
    pg_resolve_data
    local postmaster; postmaster="$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)"
    [ -n "$postmaster" ] && mapfile -t backends < <(pgrep -P "$postmaster" || true)
    pg_ctl_stop fast 30 || pg_ctl_stop immediate 10 || true
  fi
  stop_bg "$PG_NAME"
  kill_leftover_backends "${backends[@]}"
}

cmd_status() {
  if pg_up; then
    log "running (pid $(cat "$(pid_file "$PG_NAME")"), 127.0.0.1:$PG_PORT)"
    return 0
  fi
  log "not running"
  return 1
}

cmd_clean() {
  cmd_stop
  local link="$DOCDB_RUN/pg"
  if [ -L "$link" ]; then
    local target; target="$(readlink "$link")"
    rm -rf "$target"
    rmdir "$(dirname "$target")" "$(dirname "$(dirname "$target")")" 2>/dev/null || true
  fi
  rm -rf "$DOCDB_RUN"
  log "removed $DOCDB_RUN"
}

cmd_env() { echo "export POSTGRES_URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres"; }

# settings: the server settings above (FerretDB's and the RUM choice) as postgresql.conf lines: the production
# image (deployments/docker/documentdb.Dockerfile) appends them to the configuration every new cluster starts from.
cmd_settings() {
  local s
  for s in "${DOCDB_SETTINGS[@]}"; do printf "%s = '%s'\n" "${s%%=*}" "${s#*=}"; done
}

case "${1:-}" in
  settings) cmd_settings ;;
  create-sql) create_extensions_sql ;;
  *) run_command "$@" ;;
esac

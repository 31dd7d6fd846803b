#!/usr/bin/env bash
# A real Apache Kafka 4.x broker (KRaft, one node acting as broker + controller) on loopback, run from
# Maven Central jars with `java -cp` (no Docker, no tarball).
#
#   kafka.sh install   download the jars once into $JOBSCHED_CACHE/kafka/<version>/libs (needs java 17+, mvn)
#   kafka.sh start     install if needed, format storage on first start, start, wait until it serves metadata
#   kafka.sh stop      stop the broker (data is kept)
#   kafka.sh status    exit 0 when running
#   kafka.sh clean     stop and delete the data dir
#   kafka.sh env       print `export KAFKA_BROKERS=127.0.0.1:<port>`
#
# Environment: KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (19093), KAFKA_HEAP_OPTS (-Xms256m -Xmx512m),
# KAFKA_CLUSTER_ID (fixed default below), JAVA_HOME (optional), JOBSCHED_CACHE / JOBSCHED_RUN_DIR (lib.sh),
# KAFKA_FRESH=1 (`make test`): a broker this call starts begins on an empty data dir (a running one is kept).
SERVER_NAME=kafka
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
# Any 16-byte base64url UUID (`java -cp ... kafka.tools.StorageTool random-uuid`). Fixed, so a data dir
# formatted by something else (another cluster id) is recognised and re-formatted instead of half-used.
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-i9JTutfrTjidXEteLImH0Q}"
NODE_ID=1
READY_TIMEOUT_S=90
# Maven 3.8's default maven-dependency-plugin is 2.8; pin a current one.
MVN_DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

POM="$LOCAL_DIR/kafka/pom.xml"
[ -f "$POM" ] || die "missing $POM"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | first_lines 1)"
[ -n "$KAFKA_VERSION" ] || die "no <kafka.version> in $POM"
POM_SHA="$(sha256sum "$POM" | cut -d' ' -f1)"
KAFKA_HOME="$JOBSCHED_CACHE/kafka/$KAFKA_VERSION"
LIBS="$KAFKA_HOME/libs"
STAMP="$LIBS/.pom.sha256"     # written last: the cache is complete only when it matches the pom
STATE_DIR="$JOBSCHED_RUN_DIR/kafka"
DATA_DIR="$STATE_DIR/data"
PROPS="$STATE_DIR/server.properties"
LOCK="$JOBSCHED_RUN_DIR/kafka.lock"
PID_FILE="$(pid_file kafka)"
LOG_FILE="$(log_file kafka)"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# One kafka.sh at a time per run dir (parallel test workers may all call `start`). fd 9 is closed for the
# broker itself (see start_broker), so the lock is released when this script exits.
take_lock() {
  exec 9>"$LOCK"
  flock -w 300 9 || die "another kafka.sh holds $LOCK for more than 300 s"
}

ensure_java() {
  if ! command -v "$JAVA" >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ] && command -v apt-get >/dev/null 2>&1 \
     && [ "$(id -u)" -eq 0 ]; then
    apt_install openjdk-17-jre-headless
  fi
  require_cmd "$JAVA" "Kafka needs a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)"
  local v
  v="$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p')"
  [ "${v%%.*}" -ge 17 ] 2>/dev/null || die "Kafka $KAFKA_VERSION needs Java 17+, '$JAVA' is version '${v:-unknown}'"
}

libs_cached() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$POM_SHA" ]; }

cmd_install() {
  ensure_java
  libs_cached && return 0
  # The cache may be shared by several run dirs (JOBSCHED_RUN_DIR): one download at a time.
  mkdir -p "$KAFKA_HOME"
  exec 8>"$KAFKA_HOME/install.lock"
  flock -w 600 8 || die "another install holds $KAFKA_HOME/install.lock for more than 600 s"
  libs_cached && return 0
  if ! command -v mvn >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    apt_install maven
  fi
  require_cmd mvn "needed once to download the Kafka jars from Maven Central (Debian: apt-get install maven)"
  log "downloading Kafka $KAFKA_VERSION jars from Maven Central into $LIBS"
  local tmp="$KAFKA_HOME/libs.partial.$$" out="$KAFKA_HOME/mvn.log"
  rm -rf "$tmp"
  # The pom is packaging=pom: nothing is built and nothing is written next to it.
  if ! mvn -B -q -f "$POM" -Dmaven.repo.local="$JOBSCHED_CACHE/kafka/m2" \
         "$MVN_DEP_PLUGIN:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$tmp" >"$out" 2>&1; then
    tail -n 30 "$out" >&2
    rm -rf "$tmp"
    die "mvn could not fetch the Kafka jars (full output: $out)"
  fi
  compgen -G "$tmp/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null || { rm -rf "$tmp"; die "kafka_2.13-$KAFKA_VERSION.jar missing after mvn"; }
  echo "$POM_SHA" >"$tmp/.pom.sha256"
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  log "installed $(find "$LIBS" -name '*.jar' | wc -l) jars ($(du -sh "$LIBS" | cut -f1))"
}

# The pid in the pid file belongs to *our* broker (not a recycled pid of some other process).
broker_pid_ours() {
  is_running kafka || return 1
  local pid; pid="$(cat "$PID_FILE")"
  cmdline_has "$pid" "kafka.Kafka $PROPS"
}

# Readiness: the port accepts connections AND the broker answers a metadata request listing itself AND
# the group coordinator answers (the first FindCoordinator creates __consumer_offsets: doing it here moves
# ~3 s of librdkafka coordinator retries out of the first test that joins a group).
# Uses confluent_kafka from the repo's venv when it has it; otherwise the broker's own "started" log line.
VENV_PY="$REPO_ROOT/.venv/bin/python"
have_py_client() { [ -x "$VENV_PY" ] && "$VENV_PY" -c 'import confluent_kafka' >/dev/null 2>&1; }
metadata_ok_py() {
  "$VENV_PY" - "$KAFKA_PORT" <<'PY'
import sys
from confluent_kafka.admin import AdminClient
port = int(sys.argv[1])
admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "socket.connection.setup.timeout.ms": 2000,
                     "log_level": 0})
md = admin.list_topics(timeout=3)
if not any(b.port == port for b in md.brokers.values()):
    sys.exit(1)
# Raises (-> not ready yet) until the group coordinator is loaded; an unknown group is reported as DEAD.
admin.describe_consumer_groups(["jobsched-readiness-probe"], request_timeout=3)["jobsched-readiness-probe"].result()
PY
}
metadata_ok_log() { grep -q 'KafkaRaftServer.*Kafka Server started' "$LOG_FILE"; }
broker_ready() {
  tcp_open 127.0.0.1 "$KAFKA_PORT" || return 1
  if [ "$READY_VIA" = py ]; then metadata_ok_py; else metadata_ok_log; fi
}

write_props() {
  mkdir -p "$STATE_DIR"
  cat >"$PROPS.tmp" <<EOF
# Generated by deployments/local/kafka.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA_DIR
# Tests create their topics explicitly; a typo must fail, not create a topic.
auto.create.topics.enable=false
num.partitions=1
# One node: every internal topic has replication factor 1.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
# Default 3 s: the first consumer of a group would wait that long before its first assignment.
group.initial.rebalance.delay.ms=0
EOF
  mv "$PROPS.tmp" "$PROPS"
}

# Format on first start only. Re-format (wiping test data) when the dir is unusable: half-formatted,
# another node id, or another cluster id.
ensure_formatted() {
  local meta="$DATA_DIR/meta.properties" cid nid
  if [ -f "$meta" ]; then
    cid="$(sed -n 's/^cluster\.id=//p' "$meta")"
    nid="$(sed -n 's/^node\.id=//p' "$meta")"
    if [ "$cid" = "$KAFKA_CLUSTER_ID" ] && [ "$nid" = "$NODE_ID" ] && [ -d "$DATA_DIR/__cluster_metadata-0" ]; then
      return 0
    fi
    log "$DATA_DIR was formatted for cluster.id=${cid:-?} node.id=${nid:-?} (want $KAFKA_CLUSTER_ID/$NODE_ID): re-formatting"
  fi
  rm -rf "$DATA_DIR"
  mkdir -p "$DATA_DIR"
  local out="$STATE_DIR/format.log"
  if ! "$JAVA" -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$LIBS/*" kafka.tools.StorageTool \
         format --standalone -t "$KAFKA_CLUSTER_ID" -c "$PROPS" >"$out" 2>&1; then
    cat "$out" >&2
    rm -rf "$DATA_DIR"
    die "formatting $DATA_DIR failed"
  fi
  log "formatted $DATA_DIR (cluster.id=$KAFKA_CLUSTER_ID)"
}

# Something already listens on our port without a valid pid file: adopt our own orphaned broker (same
# server.properties), refuse anything else.
adopt_or_refuse() {
  local port="$1" pid
  pid="$(port_pid "$port")"
  if [ -n "$pid" ] && cmdline_has "$pid" "kafka.Kafka $PROPS"; then
    log "adopting running broker pid $pid (its pid file was missing or stale)"
    echo "$pid" >"$PID_FILE"
    return 0
  fi
  die "port 127.0.0.1:$port (kafka) is in use by $(port_holder "$port"); stop it or set KAFKA_PORT/KAFKA_CONTROLLER_PORT"
}

start_broker() {
  # -Dorg.slf4j.simpleLogger.*: warnings only, plus the one INFO line "Kafka Server started".
  # 8>&- 9>&- : the broker must not inherit (and so keep holding) the install / kafka.sh locks.
  # shellcheck disable=SC2086  # KAFKA_HEAP_OPTS is a list of JVM flags
  start_bg kafka "$JAVA" $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSS" \
    -cp "$LIBS/*" kafka.Kafka "$PROPS" 8>&- 9>&-
}

cmd_start() {
  take_lock
  cmd_install
  READY_VIA=log
  have_py_client && READY_VIA=py
  if broker_pid_ours; then
    if broker_ready; then
      log "already running (pid $(cat "$PID_FILE"), 127.0.0.1:$KAFKA_PORT)"
      return 0
    fi
    log "pid $(cat "$PID_FILE") is alive but not ready yet: waiting"
    wait_ready kafka "$READY_TIMEOUT_S" broker_ready
    return 0
  fi
  [ -f "$PID_FILE" ] && { log "removing stale pid file ($(cat "$PID_FILE"))"; rm -f "$PID_FILE"; }
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    broker_pid_ours && break
    if tcp_open 127.0.0.1 "$p"; then adopt_or_refuse "$p"; fi
  done
  if broker_pid_ours; then
    wait_ready kafka "$READY_TIMEOUT_S" broker_ready
    return 0
  fi
  write_props
  # Every test names its own topics and groups, so a test run's broker keeps nothing worth keeping, and
  # what earlier runs left (thousands of topics and groups) only grows its heap until it fails mid-run.
  if [ "${KAFKA_FRESH:-0}" = 1 ] && [ -d "$DATA_DIR" ]; then
    log "KAFKA_FRESH=1: starting on an empty data dir"
    rm -rf "$DATA_DIR"
  fi
  ensure_formatted
  local t0=$SECONDS
  start_broker
  wait_ready kafka "$READY_TIMEOUT_S" broker_ready
  log "Kafka $KAFKA_VERSION ready on 127.0.0.1:$KAFKA_PORT in $((SECONDS - t0)) s (pid $(cat "$PID_FILE"), check: $READY_VIA)"
}

cmd_stop() {
  # Never signal a recycled pid: only stop the process when it is our broker.
  if [ -f "$PID_FILE" ] && ! broker_pid_ours; then
    rm -f "$PID_FILE"
    return 0
  fi
  stop_bg kafka
}

cmd_status() {
  if broker_pid_ours && tcp_open 127.0.0.1 "$KAFKA_PORT"; then
    echo "kafka running (pid $(cat "$PID_FILE"), 127.0.0.1:$KAFKA_PORT)"
    return 0
  fi
  echo "kafka not running"
  return 1
}

cmd_clean() {
  take_lock
  cmd_stop
  rm -rf "$STATE_DIR"
  log "deleted $STATE_DIR"
}

case "${1:-}" in
  install) take_lock; cmd_install ;;
  start) cmd_start ;;
  stop) take_lock; cmd_stop ;;
  status) cmd_status ;;
  clean) cmd_clean ;;
  env) echo "export KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT" ;;
  *) usage ;;
esac

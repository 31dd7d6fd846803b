#!/usr/bin/env bash
# Start, stop or describe all three local real servers (etcd, Kafka, FerretDB) at once.
#   servers.sh start   install what is missing, start all three in parallel, wait until each is ready
#   servers.sh stop    stop all three
#   servers.sh env     print the exports for MONGO_URI, KAFKA_BROKERS and ETCD_ENDPOINTS
#   servers.sh status  exit 0 when all three are running
SERVER_NAME=servers
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SERVERS=(etcd kafka ferretdb)

each() {
  local cmd="$1" pids=() failed=0
  for s in "${SERVERS[@]}"; do
    bash "$LOCAL_DIR/$s.sh" "$cmd" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  return $failed
}

case "${1:-}" in
  start)
    started=$SECONDS
    each start || die "a server failed to start (logs in $JOBSCHED_RUN_DIR)"
    log "all servers ready in $((SECONDS - started))s"
    ;;
  stop) each stop ;;
  status) for s in "${SERVERS[@]}"; do bash "$LOCAL_DIR/$s.sh" status || exit 1; done ;;
  env) for s in "${SERVERS[@]}"; do bash "$LOCAL_DIR/$s.sh" env; done ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac

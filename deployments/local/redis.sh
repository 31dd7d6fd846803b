#!/usr/bin/env bash
# Redis from Debian's package `redis-server`, for the Celery peer benchmark (loadtest/celery_peer.py). The
# benchmark starts its own throw-away instance on a free loopback port without persistence, so this script
# only installs the binary and says where it is.
#
#   redis.sh install   apt-get install redis-server unless `redis-server` is already on PATH
#   redis.sh path      install if needed, print the path of redis-server
SERVER_NAME=redis
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  echo "usage: $0 {install|path}" >&2
  exit 2
}

cmd_install() {
  command -v redis-server >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 ||
    die "'redis-server' not on PATH and no apt-get: install Redis 6+ yourself (Debian/Ubuntu package redis-server)"
  local default_was_open=0
  if tcp_open 127.0.0.1 6379; then default_was_open=1; fi
  apt_install redis-server
  command -v redis-server >/dev/null 2>&1 || die "redis-server installed but not on PATH (expected /usr/bin/redis-server)"
  log "installed $(redis-server --version | first_lines 1)"
  # The package's postinst starts a default instance on 127.0.0.1:6379 where an init system lets it; the
  # benchmark never uses it, so don't leave a stray server behind.
  if [ "$default_was_open" -eq 0 ] && tcp_open 127.0.0.1 6379; then
    log "the package started its default redis on 127.0.0.1:6379; stopping it"
    if [ -d /run/systemd/system ]; then
      systemctl stop redis-server.service || true
    elif [ -x /etc/init.d/redis-server ]; then
      /etc/init.d/redis-server stop || true
    fi
  fi
}

cmd_path() {
  cmd_install
  command -v redis-server
}

case "${1:-}" in
  install | path) "cmd_$1" ;;
  *) usage ;;
esac

#!/usr/bin/env bash
# Command-line tools some tests call, installed once from Debian's packages: promtool (package prometheus)
# checks the Prometheus config, kubectl (package kubernetes-client, if no kubectl is on PATH) renders the
# Kubernetes kustomization offline, chromium (package chromium) is the headless browser the console's tests
# drive, redis-server (redis.sh) is the broker of the Celery peer benchmark, node (package nodejs) runs the
# Node.js signature check that docs/http-jobs.md gives receivers. `make test` runs this, so those
# tests never have to be skipped.
SERVER_NAME=test-tools
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v promtool >/dev/null 2>&1 || apt_install prometheus
command -v kubectl >/dev/null 2>&1 || apt_install kubernetes-client
command -v chromium >/dev/null 2>&1 || apt_install chromium fonts-dejavu-core
command -v node >/dev/null 2>&1 || apt_install nodejs
bash "$LOCAL_DIR/redis.sh" install
require_cmd promtool "install Debian's prometheus package"
require_cmd kubectl "install Debian's kubernetes-client package (or any kubectl)"
require_cmd chromium "install Debian's chromium package"
require_cmd node "install Debian's nodejs package"

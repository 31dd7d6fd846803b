#!/usr/bin/env bash
# `make test`'s pytest runs, against the servers it started: every test but the `exclusive` ones in WORKERS
# processes at once (pytest-xdist: each test has its own database, topic prefix and etcd prefix, tests/conftest.py),
# then the `exclusive` ones (they stop or restart a server every test shares) alone. The rest of the arguments go
# to both runs. Exit status: 0 when both passed (a run its arguments selected nothing of counts as passed, unless
# neither selected anything).
set -uo pipefail
workers="$1"
shift
.venv/bin/pytest -n "$workers" --dist worksteal -m "not exclusive" "$@"
shared=$?
.venv/bin/pytest -m exclusive "$@"
alone=$?
status=0
for code in "$shared" "$alone"; do
  if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then status=$code; fi # 5: no test selected
done
if [ "$shared" -eq 5 ] && [ "$alone" -eq 5 ]; then status=5; fi
exit "$status"

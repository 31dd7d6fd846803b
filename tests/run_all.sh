#!/usr/bin/env bash
# `make test`'s pytest runs, against the servers it started: every test but the `exclusive` ones in WORKERS
# processes at once (pytest-xdist: each test has its own database, topic prefix and etcd prefix, tests/conftest.py),
# then the `exclusive` ones (they stop or restart a server every test shares) alone; TEST_PHASE chooses which
# (tests/conftest.py), so a `-m` among the arguments selects within each. The rest of the arguments go
# to both runs. Exit status: 0 when both passed (a run its arguments selected nothing of counts as passed, unless
# neither selected anything).
set -uo pipefail
workers="$1"
shift
TEST_PHASE=shared .venv/bin/pytest -n "$workers" --dist worksteal "$@"
shared=$?
if [ "$shared" -ge 2 ] && [ "$shared" -le 4 ]; then exit "$shared"; fi # interrupted, internal or usage error
TEST_PHASE=exclusive .venv/bin/pytest "$@"
alone=$?
status=0
for code in "$shared" "$alone"; do
  if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then status=$code; fi # 5: no test selected
done
if [ "$shared" -eq 5 ] && [ "$alone" -eq 5 ]; then status=5; fi
exit "$status"

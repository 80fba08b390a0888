#!/usr/bin/env bash
# ruff (lint and format), colcon build, colcon test, colcon test-result --verbose.
# Non-zero on any failure and when no test ran at all.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck disable=SC1091
source scripts/env.sh          # before `set -u`: colcon's setup.bash reads unset variables
set -uo pipefail
rm -rf build/*/test_results log/latest_test 2>/dev/null
echo "ruff check + ruff format --check (ruff.toml)"
ruff check . || exit 1
ruff format --check . || exit 1
colcon --log-base log build --base-paths src --event-handlers console_cohesion- summary+ \
  --cmake-args -DPython3_EXECUTABLE="$ROOT/.venv/bin/python" -DBUILD_TESTING=OFF || exit 1
echo "conformance kit on the shipped experts (python -m wam_core.models.check --untimed)"
# --untimed: the latency verdict on a shared machine is its load of the moment; the
# figures are printed, and bench/models.py judges them
python -m wam_core.models.check models/world_expert models/action_expert --untimed || exit 1
# Sequential: the tests start real DDS participants and processes; in parallel on
# 2 cores they would measure each other.
colcon --log-base log test --base-paths src --executor sequential \
  --event-handlers console_direct+ --pytest-args -p no:cacheprovider
test_rc=$?
summary=$(colcon test-result --test-result-base build --verbose)
result_rc=$?
echo "$summary"
total=$(echo "$summary" | sed -n 's/^Summary: \([0-9]*\) tests.*/\1/p' | tail -1)
if [ -z "$total" ] || [ "$total" -eq 0 ]; then
  echo "error: no test ran" >&2
  exit 1
fi
if [ $test_rc -ne 0 ] || [ $result_rc -ne 0 ]; then
  exit 1
fi

#!/usr/bin/env bash
# focus_ros as a ROS 2 user gets it: a temporary colcon workspace with this checkout in
# src/focus_ros, built with `colcon build` (the README's command, plus the PyPI-wheel option),
# tested with `colcon test` (a representative subset: the install tree, the installed node
# started as `ros2 run` starts it and answering real events on loopback, every launch file,
# package.xml, parameters, interfaces, the ROS node tests), and the results checked with
# `colcon test-result`. Called by `make test-workspace` (CI) with the .venv of `make setup`.
#
# Nothing is left behind: the workspace is a mktemp directory removed on exit (also on
# failure or Ctrl-C), colcon runs in a process group of its own that is killed on exit, and
# the tests stop their nodes themselves (test/ros_harness.py). FOCUS_ROS_KEEP_WORKSPACE=1
# keeps the workspace for inspection. COLCON_PYTEST_ARGS replaces the test subset.
set -euo pipefail

repository=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repository/.venv}
workspace=$(mktemp -d "${TMPDIR:-/tmp}/focus_ros_ws.XXXXXX")
group=""

cleanup() {
  status=$?
  if [ -n "$group" ]; then
    kill -TERM -- "-$group" 2>/dev/null && sleep 1
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  left=$(ps -eo pid=,args= | grep -F "$workspace/" | grep -v -F "grep" || true)
  if [ -n "$left" ]; then
    echo "colcon workspace check: processes left behind:"; echo "$left"; status=1
  fi
  if [ -n "${FOCUS_ROS_KEEP_WORKSPACE:-}" ]; then
    echo "workspace kept: $workspace"
  else
    rm -rf "$workspace"
  fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run "$@" in a process group of its own (killed by cleanup if we stop early); its status
run_in_group() {
  setsid "$@" &
  group=$!
  local status=0
  wait "$group" || status=$?
  group=""
  return $status
}

echo "== colcon workspace in $workspace"
mkdir -p "$workspace/src/focus_ros"
# this checkout's files (tracked and new, not ignored): what a clone of it would hold
(cd "$repository" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$repository" && xargs -0 cp --parents -t "$workspace/src/focus_ros" 2>/dev/null || true)
test -f "$workspace/src/focus_ros/package.xml" || { echo "copying the sources failed"; exit 1; }

export PATH="$venv/bin:$PATH" AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv"
unset COLCON_PREFIX_PATH PYTHONPATH
shared_data="$repository/../shared/data"
[ -d "$shared_data" ] && export FOCUS_ROS_SHARED_DATA=$(cd "$shared_data" && pwd)
export FOCUS_ROS_REQUIRE_INSTALL=1   # the install-tree tests fail rather than skip
cd "$workspace"

echo "== colcon build (log: build.log)"
start=$(date +%s)
run_in_group colcon build --base-paths src/focus_ros src/focus_ros/interfaces --packages-up-to focus_ros \
    --cmake-args -DFOCUS_ROS_PYPI_WHEELS=ON -DPython3_EXECUTABLE="$venv/bin/python" \
    > build.log 2>&1 || { tail -40 build.log; echo "colcon build failed"; exit 1; }
echo "   built in $(( $(date +%s) - start )) s"
# interfaces/tf2_msgs is COLCON_IGNOREd: a ROS install has tf2_msgs, which a copy built here would
# shadow; on the wheels' route the one `make setup` built into $venv serves (test_interfaces.py)
if [ -e install/tf2_msgs ]; then
  echo "colcon built interfaces/tf2_msgs (its COLCON_IGNORE is gone?): it would shadow the system's"; exit 1
fi

subset=${COLCON_PYTEST_ARGS:-"test/test_workspace_install.py test/test_launch_files.py \
test/test_launch_stand_in.py test/test_package_manifest.py test/test_parameters.py test/test_process_cleanup.py \
test/test_interfaces.py test/test_end_to_end.py \
test/test_angular_velocity_node.py"}
echo "== colcon test (pytest ${subset//$'\n'/ })"
start=$(date +%s)
# shellcheck disable=SC2086
run_in_group colcon test --packages-select focus_ros --event-handlers console_direct+ \
    --pytest-args $subset -rs --basetemp="$workspace/pytest-tmp" > test.log 2>&1 || true
echo "   tested in $(( $(date +%s) - start )) s"
grep -E "^(FAILED|ERROR|SKIPPED)|[0-9]+ (passed|failed)" test.log || true
echo "== colcon test-result"
if ! colcon test-result --test-result-base build/focus_ros --verbose; then
  tail -60 test.log; echo "colcon test failed"; exit 1
fi
# the tests must have run (a `colcon test` that runs nothing also "passes")
passed=$(grep -oE "[0-9]+ passed" test.log | tail -1 | cut -d' ' -f1)
minimum=$([ -n "${COLCON_PYTEST_ARGS:-}" ] && echo 1 || echo 20)
if [ -z "$passed" ] || [ "$passed" -lt "$minimum" ]; then
  tail -30 test.log; echo "colcon test ran ${passed:-no} tests"; exit 1
fi
echo "colcon workspace check passed: $passed tests"

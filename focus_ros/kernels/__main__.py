"""``python -m focus_ros.kernels``: compile every kernel of focus_ros into numba's cache (see
:mod:`focus_ros.kernels`); the same as ``focus-ros compile``."""

import sys

from focus_ros.kernels.command import main

sys.exit(main())

"""focus_ros: motion compensation for event cameras with the focus loss functions of
Gallego, Gehrig and Scaramuzza, "Focus Is All You Need" (CVPR 2019).

The data flow, and the modules along it:

    sources (text, bags, simulator, ROS topics) -> events / windows -> camera and warps
    -> image of warped events (IWE) -> focus losses -> optimizer -> estimators
    -> ROS nodes (focus_ros.ros) / command line (focus_ros.cli)

Everything outside ``focus_ros.ros`` is free of rclpy and usable offline.
"""

import os as _os

# The engine's hot loops are single-threaded Numba; OpenBLAS worker threads only compete
# with them (measured here: a 240x180 dot product stalled 8-16 ms on a busy 2-core machine
# instead of 30 us). Takes effect when focus_ros is imported before numpy, as the entry
# points do; set OPENBLAS_NUM_THREADS yourself to override.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"

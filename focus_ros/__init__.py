"""focus_ros: motion compensation for event cameras with the focus loss functions of Gallego,
Gehrig and Scaramuzza, "Focus Is All You Need" (CVPR 2019).

The package follows the data flow, one room per step:

    sources    ECD text folders, ROS 1/2 bags, the simulator  (focus_ros.sources)
    codecs     event messages on the wire <-> Events, one module per format  (focus_ros.codecs)
    events     Events (x, y px; t ns; p ±1), windows of events (fixed, or fitted to the sensor and
               the motion and thinned to a compute budget), checks on a live stream (events, windows, stream)
    camera     calibration, undistorted bearing look-up table; camera trajectories and the TF
               tree they come from on a robot  (camera, poses)
    warps      point trajectories θ with their Jacobians  (warps)
    IWE        image of warped events, on coarser bins for large sensors  (iwe; visualization turns
               it into pictures)
    losses     the 22 focus losses, value and image-space gradient  (focus_ros.losses)
    objective  warp -> IWE -> loss, and its gradient w.r.t. θ  (objective)
    optimizer  non-linear CG, BFGS, L-BFGS  (optimize)
    estimators one per task on the steps above: angular velocity (θ = ω), depth (θ = Z),
               optical flow (θ = v), and how sure an estimate is (covariance)
               (focus_ros.estimators, with each task's own engine parts in focus_ros.depth and
               focus_ros.flow)
    pipelines  each task's loop, once: windows or keyframes -> estimator -> feedback -> outputs,
               for the nodes, the command line and the benchmarks alike  (focus_ros.pipelines)
    settings   every setting declared once, with its unit and range; the options, the ROS
               parameters and the parameter docs come from it  (focus_ros.settings)
    runtime    how an estimator runs beside a node: inline, thread, process  (focus_ros.runtime)
    kernels    every numba kernel compiled into numba's cache at install, and what a start would
               still compile  (focus_ros.kernels)
    outputs    ROS 2 nodes and the demos (focus_ros.ros, the only rclpy user), the command line
               (focus_ros.cli), evaluation against ground truth (focus_ros.evaluation)

Where new things go: a fifth wire encoding is one module in focus_ros.codecs and one row in its
table of encodings; a 23rd loss is one function, one registry row and one test row (focus_ros.losses says where); a
fourth task is an estimator in focus_ros.estimators (its own engine parts in a package beside
depth/ and flow/), its loop in focus_ros.pipelines, one row in focus_ros.runtime's table of kinds, one row in focus_ros.kernels'
table of groups (with the function that compiles it), and a thin node in focus_ros.ros.

Everything outside ``focus_ros.ros`` is free of rclpy and usable offline.
"""

import os as _os

# The engine's hot loops are single-threaded Numba; OpenBLAS worker threads only compete with them
# for the cores (on a busy 2-core machine a small dot product then stalls for milliseconds). Takes
# effect when focus_ros is imported before numpy, as the entry points do; set OPENBLAS_NUM_THREADS
# yourself to override.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"

"""Estimators: one window (or keyframe) of events in, one motion estimate out; the same code
behind the ROS nodes and the command line.

- ``angular_velocity``: :class:`~focus_ros.estimators.angular_velocity.AngularVelocityEstimator`
  and its settings: the angular velocity (rad/s) of a rotating camera per window;
- ``optical_flow``: :class:`~focus_ros.estimators.optical_flow.OpticalFlowEstimator`: the flow
  (px/s) of every patch of a grid per window (engine: :mod:`focus_ros.flow`);
- ``depth``: :class:`~focus_ros.estimators.depth.DepthEstimator`:
  semi-dense depth (m) of a reference view from events and known poses (engine:
  :mod:`focus_ros.depth`).
- ``covariance``: how sure an estimate is: the covariance of the angular velocity ((rad/s)^2)
  from the focus's curvature at the optimum, scaled by a factor calibrated on simulated rotations.

Each estimator module holds a frozen ``...Settings`` dataclass (every field with its unit and default),
the estimator class and its result type. Where things go: a new estimator is one
module here (settings, an estimator class with an ``estimate`` method, result), one estimator kind in
:mod:`focus_ros.runtime` (how a worker builds and runs it) and a node in :mod:`focus_ros.ros`.
Running estimators in a process of their own, queues and shared memory are
:mod:`focus_ros.runtime`'s job, not this package's.

The submodules load numba-compiled engines; import the one you need
(``from focus_ros.estimators.angular_velocity import AngularVelocityEstimator``): this package
imports none of them.
"""

__all__ = ["angular_velocity", "optical_flow", "depth", "covariance"]

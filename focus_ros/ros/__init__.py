"""The ROS 2 layer, the only part of focus_ros that imports rclpy; thin over the offline engine.

- ``event_input``: the one way in for events that every node composes (subscription, decoding
  with ``focus_ros.codecs``, stream checks, calibration, input diagnostics);
- ``parameters`` (``FocusNode``, the base of every node), ``estimating_node`` (the base of the
  three estimating nodes: their estimator's process from ``focus_ros.runtime``, /diagnostics);
- ``messages`` and ``depth_messages``: images, diagnostics, calibration, PointCloud2 with numpy;
- the nodes: ``angular_velocity_node`` (θ = ω), ``depth_node`` (θ = Z), ``optical_flow_node``
  (θ = v), ``replay_node`` (bags onto topics); ``entry_point``: how each starts;
- ``demos``: ``make demo`` through the nodes.

A fourth task's node: an estimator in ``focus_ros.estimators``, a row in
``focus_ros.runtime``'s table of kinds, and a thin node here on ``EstimatingNode`` and ``EventInput``.
"""

__all__ = ["angular_velocity_node", "demos", "depth_messages", "depth_node", "entry_point", "estimating_node",
           "event_input", "log", "messages", "optical_flow_node", "parameters", "replay_node"]

"""Where events come from, and their ground truth: the Event Camera Dataset's text folders
(``ecd``), ROS 1 and ROS 2 bags (``bags``, one module per role, with ``bags.ros1_salvage`` for a
ROS 1 bag cut short), and the event-camera simulator (``simulator`` over ``scenes``,
``trajectories`` and its named ``presets``). Each format's reader/writer owns its own form of
depth ground truth (``depth_maps.DepthGroundTruth`` is the one in-memory form) and of camera
poses (``trajectory_readers`` builds :class:`focus_ros.poses.Trajectory` from ``groundtruth.txt``,
a bag's pose topic or its TF: the core knows no file format); ``sequence`` is the one entry point
for "a folder or a bag"; ``summary`` says what a sequence holds (``focus-ros info``); ``recording``
is the in-memory result of reading one whole; ``depth_set`` is the wide depth evaluation set.
"""

__all__ = ["bags", "depth_maps", "depth_set", "ecd", "errors", "recording", "presets", "scenes", "sequence",
           "simulator", "summary", "trajectories", "trajectory_readers"]

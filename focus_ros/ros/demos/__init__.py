"""`make demo`'s two jobs through real ROS 2 topics (``python -m focus_ros.ros.demos``): the angular
velocity node on a simulated rotation (:mod:`.rotation`) and the depth node on a simulated slider
(:mod:`.depth`), each scored by :mod:`focus_ros.evaluation`; :mod:`.session` starts the node and
replays the bag."""

__all__ = ["depth", "rotation", "session"]

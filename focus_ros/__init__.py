"""focus_ros: motion compensation for event cameras with the focus loss functions of
Gallego, Gehrig and Scaramuzza, "Focus Is All You Need" (CVPR 2019).

The data flow, and the modules along it:

    sources (text, bags, simulator, ROS topics) -> events / windows -> camera and warps
    -> image of warped events (IWE) -> focus losses -> optimizer -> estimators
    -> ROS nodes (focus_ros.ros) / command line (focus_ros.cli)

Everything outside ``focus_ros.ros`` is free of rclpy and usable offline.
"""

__version__ = "0.1.0"

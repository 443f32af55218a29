"""Bag replay + angular velocity node + rviz.

    ros2 launch focus_ros replay.launch.py bag:=/data/boxes_rotation.bag rate:=0.5
    ros2 launch focus_ros replay.launch.py bag:=/data/prophesee_bag rviz:=false \
        events:=/event_camera/events event_message_type:=event_camera_msgs/EventPacket \
        camera_info:=/event_camera/camera_info params_file:=/path/to/my_camera.yaml fixed_frame:=camera

Plays a ROS 1 bag of the Event Camera Dataset (or any ROS 1 / ROS 2 bag with
dvs_msgs/EventArray or event_camera_msgs/EventPacket) onto its own topics, estimates the
angular velocity and shows the images of warped events and the estimate in rviz.
`events` is the bag's event topic; `params_file` sets the node, and gives the calibration
used when the bag has no camera_info (default: the dataset's DAVIS240C); of `camera_info`,
`event_message_type`, `loss` and `use_sim_time` only those given on the command line override
it. `rate` 1 plays in real time, 0 as fast as the estimator consumes. rviz's fixed frame is
`fixed_frame` (the events' frame; with depth:=true the poses' world frame).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

#: launch argument -> the nodes' parameter it overrides, only when given
OVERRIDES = {"camera_info": "camera_info_topic", "event_message_type": "event_message_type",
             "use_sim_time": "use_sim_time"}


def given(context, overrides: dict) -> dict:
    """The parameters of the launch arguments given a value on the command line (not left empty)."""
    return {parameter: LaunchConfiguration(argument) for argument, parameter in overrides.items()
            if context.launch_configurations.get(argument, "")}


def nodes(context, share):
    configurations = context.launch_configurations
    depth_wanted = configurations.get("depth", "false").strip().lower() in ("true", "1")
    replay = Node(package="focus_ros", executable="replay_node", name="replay_node", output="screen",
                  parameters=[{"bag": LaunchConfiguration("bag"), "rate": LaunchConfiguration("rate")},
                              given(context, {"use_sim_time": "use_sim_time"})])
    estimator = Node(package="focus_ros", executable="angular_velocity_node", name="angular_velocity_node",
                     output="screen",
                     parameters=[LaunchConfiguration("params_file"), given(context, {**OVERRIDES, "loss": "loss"})],
                     remappings=[("events", LaunchConfiguration("events"))])
    # depth:=true also starts depth_node on the bag's events, camera_info and poses, and rviz
    # shows its point cloud too (config/depth.rviz, fixed frame: the poses' world frame):
    #   ros2 launch focus_ros replay.launch.py bag:=/data/slider_depth.bag depth:=true rate:=0.5
    depth = Node(package="focus_ros", executable="depth_node", name="depth_node", output="screen",
                 parameters=[LaunchConfiguration("depth_params_file"), given(context, OVERRIDES)],
                 remappings=[("events", LaunchConfiguration("events")), ("pose", LaunchConfiguration("pose"))],
                 condition=IfCondition(LaunchConfiguration("depth")))
    fixed_frame = configurations.get("fixed_frame", "") or ("world" if depth_wanted else "dvs")
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2",
                arguments=["-d", os.path.join(share, "config", "depth.rviz" if depth_wanted else "focus.rviz"),
                           "--fixed-frame", fixed_frame],
                parameters=[given(context, {"use_sim_time": "use_sim_time"})],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return [replay, estimator, depth, rviz]


def generate_launch_description():
    share = get_package_share_directory("focus_ros")
    from_file = " (default: the params_file's value, else the node's)"
    arguments = [
        DeclareLaunchArgument("bag", description="ROS 1 .bag file or ROS 2 bag folder"),
        DeclareLaunchArgument("rate", default_value="1.0",
                              description="replay rate factor: 1 = real time, 0 = as fast as the estimator consumes"),
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic in the bag"),
        DeclareLaunchArgument("camera_info", default_value="",
                              description="camera_info topic in the bag (absent: the params_file calibration)"
                                          + from_file),
        DeclareLaunchArgument("event_message_type", default_value="",
                              description="type of the bag's events: auto, dvs_msgs/EventArray or "
                                          "event_camera_msgs/EventPacket" + from_file),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "davis240c.yaml"),
                              description="angular_velocity_node parameters (YAML)"),
        DeclareLaunchArgument("loss", default_value="", description="focus loss" + from_file),
        DeclareLaunchArgument("use_sim_time", default_value="",
                              description="true: every node takes its time from /clock" + from_file),
        DeclareLaunchArgument("rviz", default_value="true", description="start rviz2 (true/false)"),
        DeclareLaunchArgument("fixed_frame", default_value="",
                              description="rviz's fixed frame (default: dvs, the dataset's event frame; with "
                                          "depth:=true world, the poses' frame)"),
        DeclareLaunchArgument("depth", default_value="false", description="also start depth_node"),
        DeclareLaunchArgument("pose", default_value="/optitrack/davis", description="PoseStamped topic in the bag"),
        DeclareLaunchArgument("depth_params_file", default_value=os.path.join(share, "config", "depth_davis240c.yaml"),
                              description="depth_node parameters (YAML)"),
    ]
    return LaunchDescription(arguments + [OpaqueFunction(function=nodes, args=[share])])

"""Patch optical flow from a live event camera driver (or any event topic), with rviz.

    ros2 launch focus_ros optical_flow.launch.py events:=/dvs/events
    ros2 launch focus_ros optical_flow.launch.py \
        events:=/event_camera/events event_message_type:=event_camera_msgs/EventPacket \
        camera_info:=/event_camera/camera_info fixed_frame:=camera rviz:=false use_sim_time:=false

The node publishes ``optical_flow`` (sensor_msgs/Image 32FC2: vx, vy in px/s per patch, NaN
invalid) and ``optical_flow/image`` (rgb8 arrows over the motion-compensated image, shown in rviz
with config/optical_flow.rviz, its fixed frame ``fixed_frame``: the events' frame). The parameter
file (``params_file``) sets the node; of ``camera_info``, ``event_message_type``, ``loss`` and
``use_sim_time`` only those given on the command line override it. Remapping for the drivers as
in angular_velocity.launch.py.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

#: launch argument -> the node parameter it overrides, only when given
OVERRIDES = {"camera_info": "camera_info_topic", "event_message_type": "event_message_type", "loss": "loss",
             "use_sim_time": "use_sim_time"}


def given(context, overrides: dict) -> dict:
    """The parameters of the launch arguments given a value on the command line (not left empty)."""
    return {parameter: LaunchConfiguration(argument) for argument, parameter in overrides.items()
            if context.launch_configurations.get(argument, "")}


def nodes(context, share):
    node = Node(package="focus_ros", executable="optical_flow_node", name="optical_flow_node", output="screen",
                parameters=[LaunchConfiguration("params_file"), given(context, OVERRIDES)],
                remappings=[("events", LaunchConfiguration("events"))])
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                arguments=["-d", os.path.join(share, "config", "optical_flow.rviz"),
                           "--fixed-frame", LaunchConfiguration("fixed_frame")],
                parameters=[given(context, {"use_sim_time": "use_sim_time"})],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return [node, rviz]


def generate_launch_description():
    share = get_package_share_directory("focus_ros")
    from_file = " (default: the params_file's value, else the node's)"
    arguments = [
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic"),
        DeclareLaunchArgument("camera_info", default_value="", description="camera_info topic" + from_file),
        DeclareLaunchArgument("event_message_type", default_value="",
                              description="auto, dvs_msgs/EventArray or event_camera_msgs/EventPacket" + from_file),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "optical_flow.yaml"),
                              description="node parameters (YAML)"),
        DeclareLaunchArgument("loss", default_value="", description="focus loss" + from_file),
        DeclareLaunchArgument("use_sim_time", default_value="",
                              description="true: time from /clock (play bags with --clock)" + from_file),
        DeclareLaunchArgument("rviz", default_value="true", description="start rviz with the flow picture"),
        DeclareLaunchArgument("fixed_frame", default_value="dvs",
                              description="rviz's fixed frame: the frame of the events (dvs: the rpg driver and the "
                                          "dataset; the ros-event-camera drivers: their frame_id parameter)"),
    ]
    return LaunchDescription(arguments + [OpaqueFunction(function=nodes, args=[share])])

"""Patch optical flow from a live event camera driver (or any event topic), with rviz.

    ros2 launch focus_ros optical_flow.launch.py events:=/dvs/events
    ros2 launch focus_ros optical_flow.launch.py \
        events:=/event_camera/events event_message_type:=event_camera_msgs/EventPacket \
        camera_info:=/event_camera/camera_info rviz:=false

The node publishes ``optical_flow`` (sensor_msgs/Image 32FC2: vx, vy in px/s per patch, NaN
invalid) and ``optical_flow/image`` (rgb8 arrows over the motion-compensated image, shown in rviz
with config/optical_flow.rviz). Remapping for the drivers as in angular_velocity.launch.py.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    share = get_package_share_directory("focus_ros")
    arguments = [
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic"),
        DeclareLaunchArgument("camera_info", default_value="/dvs/camera_info", description="camera_info topic"),
        DeclareLaunchArgument("event_message_type", default_value="dvs_msgs/EventArray",
                              description="dvs_msgs/EventArray or event_camera_msgs/EventPacket"),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "optical_flow.yaml"),
                              description="node parameters (YAML)"),
        DeclareLaunchArgument("loss", default_value="variance", description="focus loss"),
        DeclareLaunchArgument("rviz", default_value="true", description="start rviz with the flow picture"),
    ]
    node = Node(
        package="focus_ros",
        executable="optical_flow_node",
        name="optical_flow_node",
        output="screen",
        parameters=[LaunchConfiguration("params_file"), {
            "camera_info_topic": LaunchConfiguration("camera_info"),
            "event_message_type": LaunchConfiguration("event_message_type"),
            "loss": LaunchConfiguration("loss"),
        }],
        remappings=[("events", LaunchConfiguration("events"))],
    )
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                arguments=["-d", os.path.join(share, "config", "optical_flow.rviz")],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return LaunchDescription(arguments + [node, rviz])

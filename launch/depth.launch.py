"""Semi-dense depth from a live event camera (or any event topic) and known camera poses.

    ros2 launch focus_ros depth.launch.py events:=/dvs/events pose:=/optitrack/davis
    ros2 launch focus_ros depth.launch.py events:=/event_camera/events \
        event_message_type:=event_camera_msgs/EventPacket \
        pose_message_type:=nav_msgs/Odometry odometry:=/vio/odometry rviz:=true

Poses come from ``pose`` (geometry_msgs/PoseStamped, e.g. motion capture) or from
``odometry`` (nav_msgs/Odometry, e.g. a VIO), chosen by ``pose_message_type``. Outputs:
``depth/points`` (PointCloud2 in the poses' world frame), ``depth/image`` and
``depth/confidence`` (32FC1), ``depth/image_color`` (rgb8) and ``/diagnostics``.
``rviz:=true`` also starts rviz2 with config/depth.rviz (the cloud coloured by depth).
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
        DeclareLaunchArgument("event_message_type", default_value="dvs_msgs/EventArray",
                              description="dvs_msgs/EventArray or event_camera_msgs/EventPacket"),
        DeclareLaunchArgument("camera_info", default_value="/dvs/camera_info", description="camera_info topic"),
        DeclareLaunchArgument("pose", default_value="/optitrack/davis",
                              description="geometry_msgs/PoseStamped topic (pose_message_type PoseStamped)"),
        DeclareLaunchArgument("odometry", default_value="/odometry",
                              description="nav_msgs/Odometry topic (pose_message_type Odometry)"),
        DeclareLaunchArgument("pose_message_type", default_value="geometry_msgs/PoseStamped",
                              description="geometry_msgs/PoseStamped or nav_msgs/Odometry"),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "depth_davis240c.yaml"),
                              description="depth_node parameters (YAML)"),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2 with config/depth.rviz"),
    ]
    node = Node(
        package="focus_ros",
        executable="depth_node",
        name="depth_node",
        output="screen",
        parameters=[LaunchConfiguration("params_file"), {
            "camera_info_topic": LaunchConfiguration("camera_info"),
            "event_message_type": LaunchConfiguration("event_message_type"),
            "pose_message_type": LaunchConfiguration("pose_message_type"),
        }],
        remappings=[("events", LaunchConfiguration("events")), ("pose", LaunchConfiguration("pose")),
                    ("odometry", LaunchConfiguration("odometry"))],
    )
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2",
                arguments=["-d", os.path.join(share, "config", "depth.rviz")],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return LaunchDescription(arguments + [node, rviz])

"""Angular velocity from a live event camera driver (or any event topic).

    ros2 launch focus_ros angular_velocity.launch.py events:=/dvs/events
    ros2 launch focus_ros angular_velocity.launch.py \
        events:=/event_camera/events event_message_type:=event_camera_msgs/EventPacket \
        camera_info:=/event_camera/camera_info params_file:=$(ros2 pkg prefix focus_ros)/share/focus_ros/config/davis346.yaml
    ros2 launch focus_ros angular_velocity.launch.py loss:=gradient_magnitude

Remapping for the common drivers:
- rpg DAVIS driver (dvs_ros_driver / davis_ros_driver): events:=/dvs/events,
  camera_info:=/dvs/camera_info, event_message_type:=dvs_msgs/EventArray (the defaults).
- ros-event-camera drivers (libcaer_driver, metavision_driver): events:=/event_camera/events,
  event_message_type:=event_camera_msgs/EventPacket; these publish best-effort, which the
  node's default QoS accepts.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = os.path.join(get_package_share_directory("focus_ros"), "config", "davis240c.yaml")
    arguments = [
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic"),
        DeclareLaunchArgument("camera_info", default_value="/dvs/camera_info", description="camera_info topic"),
        DeclareLaunchArgument("event_message_type", default_value="dvs_msgs/EventArray",
                              description="dvs_msgs/EventArray or event_camera_msgs/EventPacket"),
        DeclareLaunchArgument("params_file", default_value=config,
                              description="node parameters (YAML); default: the DAVIS240C of the dataset"),
        DeclareLaunchArgument("loss", default_value="variance", description="focus loss"),
    ]
    node = Node(
        package="focus_ros",
        executable="angular_velocity_node",
        name="angular_velocity_node",
        output="screen",
        parameters=[LaunchConfiguration("params_file"), {
            "camera_info_topic": LaunchConfiguration("camera_info"),
            "event_message_type": LaunchConfiguration("event_message_type"),
            "loss": LaunchConfiguration("loss"),
        }],
        remappings=[("events", LaunchConfiguration("events"))],
    )
    return LaunchDescription(arguments + [node])

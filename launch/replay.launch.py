"""Bag replay + angular velocity node + rviz.

    ros2 launch focus_ros replay.launch.py bag:=/data/boxes_rotation.bag rate:=0.5
    ros2 launch focus_ros replay.launch.py bag:=/data/prophesee_bag rviz:=false \
        events:=/event_camera/events event_message_type:=event_camera_msgs/EventPacket \
        camera_info:=/event_camera/camera_info params_file:=/path/to/my_camera.yaml

Plays a ROS 1 bag of the Event Camera Dataset (or any ROS 1 / ROS 2 bag with
dvs_msgs/EventArray or event_camera_msgs/EventPacket) onto its own topics, estimates the
angular velocity and shows the images of warped events and the estimate in rviz.
`events` and `camera_info` are the bag's topics; `event_message_type` is the type of its
events; `params_file` gives the calibration used when the bag has no camera_info (default:
the dataset's DAVIS240C); `rate` 1 plays in real time, 0 as fast as the estimator consumes.
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
        DeclareLaunchArgument("bag", description="ROS 1 .bag file or ROS 2 bag folder"),
        DeclareLaunchArgument("rate", default_value="1.0",
                              description="replay rate factor: 1 = real time, 0 = as fast as the estimator consumes"),
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic in the bag"),
        DeclareLaunchArgument("camera_info", default_value="/dvs/camera_info",
                              description="camera_info topic in the bag (absent: the params_file calibration)"),
        DeclareLaunchArgument("event_message_type", default_value="dvs_msgs/EventArray",
                              description="type of the bag's events: dvs_msgs/EventArray or "
                                          "event_camera_msgs/EventPacket"),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "davis240c.yaml"),
                              description="angular_velocity_node parameters (YAML)"),
        DeclareLaunchArgument("loss", default_value="variance", description="focus loss"),
        DeclareLaunchArgument("rviz", default_value="true", description="start rviz2 (true/false)"),
    ]
    replay = Node(package="focus_ros", executable="replay_node", name="replay_node", output="screen",
                  parameters=[{"bag": LaunchConfiguration("bag"), "rate": LaunchConfiguration("rate")}])
    estimator = Node(package="focus_ros", executable="angular_velocity_node", name="angular_velocity_node",
                     output="screen",
                     parameters=[LaunchConfiguration("params_file"), {
                         "camera_info_topic": LaunchConfiguration("camera_info"),
                         "event_message_type": LaunchConfiguration("event_message_type"),
                         "loss": LaunchConfiguration("loss"),
                     }],
                     remappings=[("events", LaunchConfiguration("events"))])
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2",
                arguments=["-d", os.path.join(share, "config", "focus.rviz")],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return LaunchDescription(arguments + [replay, estimator, rviz])

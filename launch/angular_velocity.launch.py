"""Angular velocity from a live event camera driver (or any event topic).

    ros2 launch focus_ros angular_velocity.launch.py events:=/dvs/events
    ros2 launch focus_ros angular_velocity.launch.py events:=/event_camera/events \
        params_file:=$(ros2 pkg prefix focus_ros)/share/focus_ros/config/davis346_libcaer.yaml
    ros2 launch focus_ros angular_velocity.launch.py loss:=gradient_magnitude use_sim_time:=true

The parameter file (``params_file``, default config/davis240c.yaml) sets the node; of the
other arguments only those given on the command line override it (``camera_info``,
``event_message_type``, ``loss``, ``frame_id``, ``use_sim_time``: left out, the file's
value or the node's default stands).

Remapping for the common drivers:
- rpg DAVIS driver (dvs_ros_driver / davis_ros_driver): events:=/dvs/events (the default
  parameter file, config/davis240c.yaml, names dvs_msgs/EventArray and /dvs/camera_info).
- ros-event-camera drivers (libcaer_driver, metavision_driver): events:=/event_camera/events
  with the driver's parameter file (config/davis346_libcaer.yaml, dvxplorer_libcaer.yaml or
  evk4_metavision.yaml: EventPacket, best-effort QoS, /event_camera/camera_info, a fallback
  calibration); with another parameter file that names dvs_msgs/EventArray, add
  event_message_type:=auto (the type the topic's publishers offer) or
  event_message_type:=event_camera_msgs/EventPacket.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

#: launch argument -> the node parameter it overrides, only when given
OVERRIDES = {"camera_info": "camera_info_topic", "event_message_type": "event_message_type", "loss": "loss",
             "frame_id": "frame_id", "use_sim_time": "use_sim_time"}


def given(context, overrides: dict) -> dict:
    """The parameters of the launch arguments given a value on the command line (not left empty)."""
    return {parameter: LaunchConfiguration(argument) for argument, parameter in overrides.items()
            if context.launch_configurations.get(argument, "")}


def nodes(context):
    return [Node(package="focus_ros", executable="angular_velocity_node", name="angular_velocity_node",
                 output="screen", parameters=[LaunchConfiguration("params_file"), given(context, OVERRIDES)],
                 remappings=[("events", LaunchConfiguration("events"))])]


def generate_launch_description():
    config = os.path.join(get_package_share_directory("focus_ros"), "config", "davis240c.yaml")
    from_file = " (default: the params_file's value, else the node's)"
    arguments = [
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic"),
        DeclareLaunchArgument("camera_info", default_value="", description="camera_info topic" + from_file),
        DeclareLaunchArgument("event_message_type", default_value="",
                              description="auto, dvs_msgs/EventArray or event_camera_msgs/EventPacket" + from_file),
        DeclareLaunchArgument("params_file", default_value=config,
                              description="node parameters (YAML); default: the DAVIS240C of the dataset"),
        DeclareLaunchArgument("loss", default_value="", description="focus loss" + from_file),
        DeclareLaunchArgument("frame_id", default_value="",
                              description="frame of the outputs" + from_file + "; the node's: the events' frame"),
        DeclareLaunchArgument("use_sim_time", default_value="",
                              description="true: time from /clock (play bags with --clock)" + from_file),
    ]
    return LaunchDescription(arguments + [OpaqueFunction(function=nodes)])

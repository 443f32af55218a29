"""Semi-dense depth from a live event camera (or any event topic) and known camera poses.

    ros2 launch focus_ros depth.launch.py events:=/dvs/events pose:=/optitrack/davis
    ros2 launch focus_ros depth.launch.py events:=/event_camera/events \
        event_message_type:=event_camera_msgs/EventPacket pose_source:=tf world_frame:=odom rviz:=true
    ros2 launch focus_ros depth.launch.py events:=/event_camera/events \
        pose_message_type:=nav_msgs/Odometry odometry:=/vio/odometry rviz:=true fixed_frame:=odom

Poses come from a topic or from TF (``pose_source``: ``auto``, the default, takes whichever gives a
camera pose first): ``pose`` (geometry_msgs/PoseStamped, e.g. motion capture) or ``odometry``
(nav_msgs/Odometry, e.g. a VIO), chosen by ``pose_message_type``; or ``/tf`` and ``/tf_static``,
the camera's frame (the events' frame_id) looked up in ``world_frame`` (default: the root of its
TF tree). Outputs: ``depth/points`` and ``depth/map`` (PointCloud2 in the world frame),
``depth/image`` and ``depth/confidence`` (32FC1), ``depth/image_color`` (rgb8) and ``/diagnostics``.
``rviz:=true`` also starts rviz2 with config/depth.rviz (the cloud coloured by depth), its
fixed frame ``fixed_frame`` (default: ``world_frame`` if given, else ``world``). The parameter
file (``params_file``) sets the node; of ``camera_info``, ``event_message_type``, ``pose_source``,
``pose_message_type``, ``world_frame`` and ``use_sim_time`` only those given on the command line
override it.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

#: launch argument -> the node parameter it overrides, only when given
OVERRIDES = {"camera_info": "camera_info_topic", "event_message_type": "event_message_type",
             "pose_source": "pose_source", "pose_message_type": "pose_message_type", "world_frame": "world_frame",
             "use_sim_time": "use_sim_time"}


def given(context, overrides: dict) -> dict:
    """The parameters of the launch arguments given a value on the command line (not left empty)."""
    return {parameter: LaunchConfiguration(argument) for argument, parameter in overrides.items()
            if context.launch_configurations.get(argument, "")}


def nodes(context, share):
    node = Node(package="focus_ros", executable="depth_node", name="depth_node", output="screen",
                parameters=[LaunchConfiguration("params_file"), given(context, OVERRIDES)],
                remappings=[("events", LaunchConfiguration("events")), ("pose", LaunchConfiguration("pose")),
                            ("odometry", LaunchConfiguration("odometry"))])
    fixed_frame = (context.launch_configurations.get("fixed_frame", "")
                   or context.launch_configurations.get("world_frame", "") or "world")
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2",
                arguments=["-d", os.path.join(share, "config", "depth.rviz"), "--fixed-frame", fixed_frame],
                parameters=[given(context, {"use_sim_time": "use_sim_time"})],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return [node, rviz]


def generate_launch_description():
    share = get_package_share_directory("focus_ros")
    from_file = " (default: the params_file's value, else the node's)"
    arguments = [
        DeclareLaunchArgument("events", default_value="/dvs/events", description="event topic"),
        DeclareLaunchArgument("event_message_type", default_value="",
                              description="auto, dvs_msgs/EventArray or event_camera_msgs/EventPacket" + from_file),
        DeclareLaunchArgument("camera_info", default_value="", description="camera_info topic" + from_file),
        DeclareLaunchArgument("pose", default_value="/optitrack/davis",
                              description="geometry_msgs/PoseStamped topic (pose_message_type PoseStamped)"),
        DeclareLaunchArgument("odometry", default_value="/odometry",
                              description="nav_msgs/Odometry topic (pose_message_type Odometry)"),
        DeclareLaunchArgument("pose_source", default_value="",
                              description="auto, topic or tf: where camera poses come from" + from_file),
        DeclareLaunchArgument("world_frame", default_value="",
                              description="frame of the clouds, and with TF the frame the camera is looked up in "
                                          "(empty: TF's root, or the poses' frame)" + from_file),
        DeclareLaunchArgument("pose_message_type", default_value="",
                              description="geometry_msgs/PoseStamped or nav_msgs/Odometry" + from_file),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "depth_davis240c.yaml"),
                              description="depth_node parameters (YAML)"),
        DeclareLaunchArgument("use_sim_time", default_value="",
                              description="true: time from /clock (play bags with --clock)" + from_file),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2 with config/depth.rviz"),
        DeclareLaunchArgument("fixed_frame", default_value="",
                              description="rviz's fixed frame (default: world_frame if given, else 'world')"),
    ]
    return LaunchDescription(arguments + [OpaqueFunction(function=nodes, args=[share])])

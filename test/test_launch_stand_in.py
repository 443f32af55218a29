"""The launch stand-in (test/launch_stand_in.py) resolves launch files the way launch_ros does.

Expected values follow launch_ros' documented behaviour: a substituted parameter is read as
YAML (``1`` an integer, ``1.0`` a double, ``true`` a bool, text a string), a ParameterValue
with value_type converts, later parameter sources override earlier ones, conditions take
true/false/1/0, and a required argument must be given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launch_stand_in import LaunchFileError, load_launch_file

HEADER = '''
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, GroupAction
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
'''

EXAMPLE = HEADER + '''
def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("bag", description="required"),
        DeclareLaunchArgument("rate", default_value="1.0", description="a double"),
        DeclareLaunchArgument("viewer", default_value="false", description="start the viewer"),
        DeclareLaunchArgument("params_file", default_value="/p/node.yaml", description="file"),
        Node(package="pkg", executable="player", name="player", namespace="ns",
             parameters=[LaunchConfiguration("params_file"),
                         {"bag": LaunchConfiguration("bag"), "rate": LaunchConfiguration("rate"),
                          "typed": ParameterValue(LaunchConfiguration("rate"), value_type=float),
                          "text": ParameterValue(LaunchConfiguration("rate"), value_type=str),
                          "flag": LaunchConfiguration("viewer"), "nested": {"size": 3, "gain": 0.5}}],
             remappings=[("events", [LaunchConfiguration("bag"), "/events"])]),
        Node(package="viewer", executable="viewer", name="viewer",
             arguments=["-d", PathJoinSubstitution(["/share", PythonExpression(["'a' + '.rviz'"])])],
             condition=IfCondition(LaunchConfiguration("viewer"))),
        GroupAction([Node(package="pkg", executable="other", name="other")],
                    condition=UnlessCondition(LaunchConfiguration("viewer"))),
    ])
'''


@pytest.fixture
def example(tmp_path):
    path = tmp_path / "example.launch.py"
    path.write_text(EXAMPLE)
    return path


def test_parameters_are_typed_as_launch_ros_types_them(example):
    [player, other] = load_launch_file(example, {"bag": "/b", "rate": "1"}).nodes
    assert player.parameters["rate"] == 1 and type(player.parameters["rate"]) is int
    assert player.parameters["typed"] == 1.0 and type(player.parameters["typed"]) is float
    assert player.parameters["text"] == "1"
    assert player.parameters["flag"] is False
    assert player.parameters["bag"] == "/b"
    assert player.parameters["nested.size"] == 3 and player.parameters["nested.gain"] == 0.5
    [player, _] = load_launch_file(example, {"bag": "/b"}).nodes
    assert player.parameters["rate"] == 1.0 and type(player.parameters["rate"]) is float
    assert other.executable == "other"


def test_command_line_is_what_launch_ros_runs(example, tmp_path):
    [player, _] = load_launch_file(example, {"bag": "/b"}).nodes
    command = player.command(tmp_path, lambda values: "/tmp/dict.yaml")
    assert command == [str(tmp_path / "lib" / "pkg" / "player"), "--ros-args", "-r", "__node:=player",
                       "-r", "__ns:=ns", "--params-file", "/p/node.yaml", "--params-file", "/tmp/dict.yaml",
                       "-r", "events:=/b/events"]


def test_conditions(example):
    nodes = load_launch_file(example, {"bag": "/b", "viewer": "True"}).nodes
    assert [n.executable for n in nodes] == ["player", "viewer"]
    assert nodes[1].arguments == ["-d", "/share/a.rviz"]
    with pytest.raises(LaunchFileError, match="not one of true, false"):
        load_launch_file(example, {"bag": "/b", "viewer": "yes"})


def test_missing_or_unknown_arguments_are_errors(example):
    with pytest.raises(LaunchFileError, match="'bag' was not given"):
        load_launch_file(example, {})
    with pytest.raises(LaunchFileError, match="declares no argument colour"):
        load_launch_file(example, {"bag": "/b", "colour": "red"})


def test_unmodelled_constructs_fail_loudly(tmp_path):
    path = tmp_path / "include.launch.py"
    path.write_text(HEADER + '''
from launch.actions import IncludeLaunchDescription
def generate_launch_description():
    return LaunchDescription([IncludeLaunchDescription("other.launch.py")])
''')
    with pytest.raises(ImportError, match="IncludeLaunchDescription"):
        load_launch_file(path, {})
    path.write_text(HEADER + '''
def generate_launch_description():
    return LaunchDescription([Node(package="p", executable="e", prefix="gdb")])
''')
    with pytest.raises(LaunchFileError, match="prefix"):
        load_launch_file(path, {})


def test_the_real_launch_modules_are_restored(example):
    import sys

    before = {name: sys.modules.get(name) for name in ("launch", "launch_ros.actions")}
    load_launch_file(example, {"bag": "/b"})
    assert {name: sys.modules.get(name) for name in before} == before


def test_an_opaque_function_sees_the_arguments_and_its_actions_run(tmp_path):
    """launch's OpaqueFunction: called with a context whose launch_configurations hold the given
    arguments and the defaults declared before it; the actions it returns are evaluated (their
    conditions too); its args are passed on."""
    path = tmp_path / "opaque.launch.py"
    path.write_text(HEADER + '''
from launch.actions import OpaqueFunction

def nodes(context, suffix):
    given = {"loss": LaunchConfiguration("loss")} if context.launch_configurations.get("loss", "") else {}
    return [Node(package="pkg", executable="estimator" + suffix, name="estimator",
                 parameters=["/p/file.yaml", given], arguments=["--frame", LaunchConfiguration("frame")]),
            Node(package="viewer", executable="viewer", name="viewer",
                 condition=IfCondition(LaunchConfiguration("viewer")))]

def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("loss", default_value="", description="empty: the file's"),
        DeclareLaunchArgument("frame", default_value="dvs", description="a frame"),
        DeclareLaunchArgument("viewer", default_value="false", description="viewer"),
        OpaqueFunction(function=nodes, args=["_node"]),
    ])
''')
    [alone] = load_launch_file(path, {}).nodes
    assert alone.executable == "estimator_node" and alone.sources == [("file", Path("/p/file.yaml")), ("dict", {})]
    assert alone.arguments == ["--frame", "dvs"]
    estimator, viewer = load_launch_file(path, {"loss": "variance", "frame": "odom", "viewer": "true"}).nodes
    assert estimator.parameters == {"loss": "variance"} and estimator.arguments == ["--frame", "odom"]
    assert viewer.executable == "viewer"

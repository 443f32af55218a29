"""What users type is accepted: an integer where a double is declared (`rate:=1`), or a string
(`estimator_cpus:=1`, a CPU list).

Real rcl argument parsing (``--ros-args -p`` and ``--params-file``), real rclpy nodes.
"""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.exceptions import InvalidParameterTypeException  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from focus_ros.ros.parameters import FocusNode  # noqa: E402


class Example(FocusNode):
    def __init__(self, **kwargs):
        super().__init__("example", **kwargs)
        self.declare_parameter("rate", 1.0)
        self.declare_parameter("count", 3)
        self.declare_parameter("distortion", [0.0, 0.0])
        self.declare_parameter("name", "x")


@pytest.fixture
def context():
    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    rclpy.shutdown(context=context)


def make(context, *ros_args):
    return Example(context=context, cli_args=["--ros-args", *ros_args])


def test_integer_on_the_command_line_is_a_double(context):
    node = make(context, "-p", "rate:=2", "-p", "distortion:=[1, -2]")
    try:
        rate = node.get_parameter("rate")
        assert rate.type_ == Parameter.Type.DOUBLE and rate.value == 2.0 and isinstance(rate.value, float)
        distortion = node.get_parameter("distortion")
        assert distortion.type_ == Parameter.Type.DOUBLE_ARRAY and list(distortion.value) == [1.0, -2.0]
    finally:
        node.destroy_node()


def test_integer_in_a_params_file_is_a_double(context, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("example:\n  ros__parameters:\n    rate: 1\n    count: 7\n")
    node = make(context, "--params-file", str(params))
    try:
        assert node.get_parameter("rate").type_ == Parameter.Type.DOUBLE
        assert node.get_parameter("rate").value == 1.0
        assert node.get_parameter("count").value == 7
    finally:
        node.destroy_node()


def test_integer_set_at_run_time_is_a_double(context):
    node = make(context)
    try:
        [result] = node.set_parameters([Parameter("rate", Parameter.Type.INTEGER, 4)])
        assert result.successful, result.reason
        assert node.get_parameter("rate").type_ == Parameter.Type.DOUBLE
        assert node.get_parameter("rate").value == 4.0
        result = node.set_parameters_atomically([Parameter("rate", Parameter.Type.INTEGER, 5)])
        assert result.successful and node.get_parameter("rate").value == 5.0
    finally:
        node.destroy_node()


def test_integer_for_a_string_is_its_digits(context, tmp_path):
    node = make(context, "-p", "name:=1")
    try:
        name = node.get_parameter("name")
        assert name.type_ == Parameter.Type.STRING and name.value == "1"
        [result] = node.set_parameters([Parameter("name", Parameter.Type.INTEGER, 23)])
        assert result.successful and node.get_parameter("name").value == "23"
    finally:
        node.destroy_node()
    params = tmp_path / "params.yaml"
    params.write_text("example:\n  ros__parameters:\n    name: 0\n")
    node = make(context, "--params-file", str(params))
    try:
        assert node.get_parameter("name").value == "0"
    finally:
        node.destroy_node()


@pytest.mark.parametrize("ros_args", [["-p", "rate:=fast"], ["-p", "count:=1.5"], ["-p", "name:=3.0"]])
def test_other_type_mismatches_are_still_refused(context, ros_args):
    with pytest.raises(InvalidParameterTypeException):
        make(context, *ros_args)


def test_wrong_type_at_run_time_is_still_refused(context):
    node = make(context)
    try:
        [result] = node.set_parameters([Parameter("count", Parameter.Type.DOUBLE, 2.5)])
        assert not result.successful
        assert node.get_parameter("count").value == 3
    finally:
        node.destroy_node()


def test_every_node_of_the_package_takes_integers_for_doubles():
    """Every rclpy Node class in the executables' modules derives from FocusNode (the
    console scripts of setup.py, so a new node is covered when its entry point is added)."""
    import ast
    import importlib
    import inspect

    from rclpy.node import Node

    from conftest import REPOSITORY_ROOT

    setup = ast.parse((REPOSITORY_ROOT / "setup.py").read_text())
    scripts = [node.value for node in ast.walk(setup)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and " = focus_ros." in node.value]
    modules = {script.split("=")[1].strip().split(":")[0] for script in scripts}
    assert "focus_ros.ros.angular_velocity_node" in modules and "focus_ros.ros.replay_node" in modules
    node_classes = []
    for name in sorted(modules):
        module = importlib.import_module(name)
        node_classes += [cls for _, cls in inspect.getmembers(module, inspect.isclass)
                         if issubclass(cls, Node) and cls.__module__ == module.__name__]
    assert node_classes
    refusing = [f"{cls.__module__}.{cls.__name__}" for cls in node_classes if not issubclass(cls, FocusNode)]
    assert not refusing, f"derive from focus_ros.ros.parameters.FocusNode (rate:=1 is a rate): {refusing}"

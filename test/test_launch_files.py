"""Every launch file in launch/, checked against the install tree of a colcon workspace.

`launch` and rviz cannot be installed here, so each launch file is evaluated with a stand-in
(test/launch_stand_in.py: what launch_ros does with arguments, substitutions, conditions and
parameters). Then, for every launch file:

- it is installed (share/focus_ros/launch) and each `name:=` its docstring shows is an
  argument it declares;
- every package it names is installed with the executable it names (lib/<package>/), or is
  a run dependency in package.xml (rviz2: not installable here); every parameter file and
  every absolute path it passes (rviz config) exists;
- the focus_ros nodes it starts, started with exactly the command line launch_ros would
  build (parameter dicts written as YAML the way launch_ros types them), come up, and each
  parameter the launch file passes has the type the node declares (an integer for a double
  is accepted: ``rate:=1``) and the value given. Each launch file is run with its defaults
  and with every float-valued argument typed as an integer.

What this cannot prove: that the real `launch` accepts the file (an unmodelled construct
fails here rather than passing), and that rviz2 starts with the config.
New launch files are covered without changes here; a required argument without a default
needs a sample value in SAMPLE_ARGUMENTS.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from rcl_interfaces.msg import ParameterType  # noqa: E402
from rcl_interfaces.srv import DescribeParameters, GetParameters  # noqa: E402

from conftest import REPOSITORY_ROOT, flattened_parameters  # noqa: E402
from launch_stand_in import load_launch_file  # noqa: E402
from ros_harness import PACKAGE, NodeProcess, client_node, install_prefix, spin_until  # noqa: E402

LAUNCH_SOURCES = sorted((REPOSITORY_ROOT / "launch").glob("*.launch.py"))

#: python type of a value as launch_ros passes it -> the ParameterType it is sent as
_TYPES = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
          float: ParameterType.PARAMETER_DOUBLE, str: ParameterType.PARAMETER_STRING}
_ARRAY_TYPES = {bool: ParameterType.PARAMETER_BOOL_ARRAY, int: ParameterType.PARAMETER_INTEGER_ARRAY,
                float: ParameterType.PARAMETER_DOUBLE_ARRAY, str: ParameterType.PARAMETER_STRING_ARRAY}
#: what a focus_ros node accepts besides its declared type (focus_ros.ros.parameters.FocusNode)
_WIDENING = {(ParameterType.PARAMETER_INTEGER, ParameterType.PARAMETER_DOUBLE),
             (ParameterType.PARAMETER_INTEGER_ARRAY, ParameterType.PARAMETER_DOUBLE_ARRAY),
             (ParameterType.PARAMETER_INTEGER, ParameterType.PARAMETER_STRING)}
_VALUE_FIELD = {ParameterType.PARAMETER_BOOL: "bool_value", ParameterType.PARAMETER_INTEGER: "integer_value",
                ParameterType.PARAMETER_DOUBLE: "double_value", ParameterType.PARAMETER_STRING: "string_value",
                ParameterType.PARAMETER_BOOL_ARRAY: "bool_array_value",
                ParameterType.PARAMETER_INTEGER_ARRAY: "integer_array_value",
                ParameterType.PARAMETER_DOUBLE_ARRAY: "double_array_value",
                ParameterType.PARAMETER_STRING_ARRAY: "string_array_value"}


@pytest.fixture(scope="module")
def prefix() -> Path:
    """The install prefix of focus_ros (a colcon workspace); the .venv layout has no install tree."""
    found = install_prefix()
    if found is None:
        reason = ("focus_ros is not installed in an ament prefix here (the .venv's editable install has "
                  "no share/focus_ros): these checks run under `colcon test` (make test-workspace)")
        if os.environ.get("FOCUS_ROS_REQUIRE_INSTALL"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def sample_arguments(tmp_path_factory) -> dict[str, str]:
    """Values for launch arguments without a default: a real bag of one-event messages every 20 ms for
    60 s (a replay node at rate 1 stays up, and answers between messages, while its parameters are read)."""
    from focus_ros.events import Events
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.recording import Recording

    bag = tmp_path_factory.mktemp("launch") / "slow_events.bag2"
    count = 3000
    t_ns = 1_000_000_000 + 20_000_000 * np.arange(count)
    events = Events.from_arrays(x=np.full(count, 10), y=np.full(count, 20), t=t_ns, p=np.ones(count))
    write_bag(bag, Recording(events=events), version=2, storage="mcap", events_per_message=1)
    return {"bag": str(bag)}


def installed(prefix: Path, source: Path) -> Path:
    return prefix / "share" / PACKAGE / "launch" / source.name


def declared_run_dependencies() -> set[str]:
    root = ElementTree.parse(REPOSITORY_ROOT / "package.xml").getroot()
    return {element.text.strip() for tag in ("depend", "exec_depend") for element in root.iter(tag)}


def package_prefix(package: str) -> Path | None:
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        return Path(get_package_prefix(package))
    except PackageNotFoundError:
        return None


def launch_variants(launch_file: Path, required: dict[str, str]) -> list[dict[str, str]]:
    """Launch arguments to try: the defaults, then every float-valued default typed as an integer."""
    defaults = load_launch_file(launch_file, required).arguments
    as_integers = {}
    for name, argument in defaults.items():
        if isinstance(argument.default_value, str) and re.fullmatch(r"-?\d+\.0*", argument.default_value):
            as_integers[name] = str(int(float(argument.default_value)))
    return [dict(required)] + ([{**required, **as_integers}] if as_integers else [])


def required_arguments(launch_file: Path, samples: dict[str, str]) -> dict[str, str]:
    source = launch_file.read_text()
    names = re.findall(r"DeclareLaunchArgument\(\s*[\"'](\w+)[\"']", source)
    return {name: samples[name] for name in names if name in samples}


@pytest.mark.parametrize("source", LAUNCH_SOURCES, ids=lambda p: p.name)
def test_launch_file_is_installed_and_declares_what_its_docstring_shows(source, prefix):
    copy = installed(prefix, source)
    assert copy.is_file(), f"{source.name} is not installed in {copy.parent} (setup.py data_files)"
    assert copy.read_text() == source.read_text(), f"the installed {copy} is stale: rebuild"
    import ast

    docstring = ast.get_docstring(ast.parse(source.read_text())) or ""
    shown = set(re.findall(r"(?<![\w:])(\w+):=", docstring))
    declared = set(re.findall(r"DeclareLaunchArgument\(\s*[\"'](\w+)[\"']", source.read_text()))
    assert shown, f"{source.name}: the docstring shows no `ros2 launch` line with arguments"
    assert shown <= declared, f"{source.name}: docstring shows {sorted(shown - declared)}, not declared"


@pytest.mark.parametrize("source", LAUNCH_SOURCES, ids=lambda p: p.name)
def test_launch_file_names_only_what_is_installed(source, prefix, sample_arguments):
    launch_file = installed(prefix, source)
    required = required_arguments(launch_file, sample_arguments)
    resolved = load_launch_file(launch_file, required)
    for argument in resolved.arguments.values():
        assert argument.description, f"{source.name}: launch argument {argument.name} has no description"
    assert resolved.nodes, f"{source.name} starts no node"
    dependencies = declared_run_dependencies()
    for node in resolved.nodes:
        where = f"{source.name}: {node.package}/{node.executable}"
        node_prefix = package_prefix(node.package)
        if node_prefix is None:
            assert node.package != PACKAGE
            assert node.package in dependencies, f"{where}: {node.package} is neither installed nor in package.xml"
        else:
            path = node_prefix / "lib" / node.package / node.executable
            assert path.is_file() and os.access(path, os.X_OK), f"{where}: no executable {path}"
        assert node.package == PACKAGE or node.package in dependencies, \
            f"{where}: package {node.package} is not a run dependency in package.xml"
        for params_file in node.parameter_files:
            assert params_file.is_file(), f"{where}: parameter file {params_file} does not exist"
            assert params_file.resolve().is_relative_to(prefix.resolve()), \
                f"{where}: default parameter file {params_file} is outside the install tree"
        paths = [Path(a) for a in node.arguments + node.ros_arguments if a.startswith("/")]
        paths += [Path(v) for v in node.parameters.values() if isinstance(v, str) and v.startswith(str(prefix))]
        for path in paths:
            assert path.exists(), f"{where}: {path} does not exist"


def expected_type(value) -> int:
    if isinstance(value, list):
        kinds = {type(item) for item in value}
        assert len(kinds) == 1, f"mixed or empty list {value!r}"
        return _ARRAY_TYPES[kinds.pop()]
    return _TYPES[type(value)]


def parameters_from_file(path: Path, node_name: str) -> dict:
    content = yaml.safe_load(path.read_text()) or {}
    values = {}
    for key in ("/**", node_name, "/" + node_name):
        if key in content:
            values.update(flattened_parameters(content[key].get("ros__parameters", {})))
    return values


def call(client_node_, executor, service_type, service_name, request, timeout_s=30.0):
    client = client_node_.create_client(service_type, service_name)
    try:
        assert spin_until(executor, client.service_is_ready, timeout_s), f"{service_name} never came up"
        future = client.call_async(request)
        assert spin_until(executor, future.done, timeout_s), f"{service_name} did not answer"
        return future.result()
    finally:
        client_node_.destroy_client(client)


@pytest.mark.parametrize("source", LAUNCH_SOURCES, ids=lambda p: p.name)
def test_launch_parameters_have_the_declared_types(source, prefix, sample_arguments, tmp_path, monkeypatch):
    launch_file = installed(prefix, source)
    required = required_arguments(launch_file, sample_arguments)
    for variant, arguments in enumerate(launch_variants(launch_file, required)):
        nodes = [n for n in load_launch_file(launch_file, arguments).nodes if n.package == PACKAGE]
        assert nodes, f"{source.name} starts no {PACKAGE} node"

        def dict_file(values, counter=iter(range(1000))):
            path = tmp_path / f"params_{variant}_{next(counter)}.yaml"
            path.write_text(yaml.safe_dump({"/**": {"ros__parameters": values}}))
            return path

        with client_node(f"launch_check_{variant}", monkeypatch) as (env, client, executor), \
                contextlib.ExitStack() as processes:
            started = []
            for node in nodes:
                assert node.name, f"{source.name}: name the node {node.executable} (name=...)"
                command = node.command(prefix, dict_file)
                log = tmp_path / f"{variant}_{node.name}.log"
                started.append((node, processes.enter_context(NodeProcess(command, env, log))))
            for node, process in started:
                check_node_parameters(node, process, client, executor, f"{source.name} {arguments}")


def check_node_parameters(node, process, client, executor, where):
    passed = {}
    for kind, values in node.sources:
        passed.update(parameters_from_file(values, node.name) if kind == "file" else values)
    names = sorted(passed)
    full_name = f"{node.namespace.rstrip('/') if node.namespace else ''}/{node.name}"
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and process.alive():
        if any(name == node.name for name, _ in client.get_node_names_and_namespaces()):
            break
        executor.spin_once(timeout_sec=0.1)
    assert process.alive(), f"{where}: {node.executable} died:\n{process.log()}"
    described = call(client, executor, DescribeParameters, f"{full_name}/describe_parameters",
                     DescribeParameters.Request(names=names)).descriptors
    values = call(client, executor, GetParameters, f"{full_name}/get_parameters",
                  GetParameters.Request(names=names)).values
    assert process.alive(), f"{where}: {node.executable} died:\n{process.log()}"
    for name, descriptor, value in zip(names, described, values):
        given = expected_type(passed[name])
        declared = descriptor.type
        assert declared != ParameterType.PARAMETER_NOT_SET, f"{where}: {node.name} declares no parameter {name}"
        assert given == declared or (given, declared) in _WIDENING, \
            f"{where}: {node.name}.{name} = {passed[name]!r} but the node declares type {declared}"
        actual = getattr(value, _VALUE_FIELD[declared])
        if isinstance(passed[name], list):
            assert list(actual) == pytest.approx(passed[name]) if given != ParameterType.PARAMETER_STRING_ARRAY \
                else list(actual) == passed[name], (where, name, actual)
        elif isinstance(passed[name], float) or given == ParameterType.PARAMETER_INTEGER:
            assert actual == pytest.approx(passed[name]) and not np.isnan(actual), (where, name, actual)
        else:
            assert actual == passed[name], (where, name, actual)


# ---------------------------------------------------------------- the user's parameter file wins

#: launch argument -> (node parameter, value in the user's parameter file, value given as an argument)
OVERRIDABLE = {
    "camera_info": ("camera_info_topic", "/from_file/camera_info", "/from_argument/camera_info"),
    "event_message_type": ("event_message_type", "event_camera_msgs/EventPacket", "dvs_msgs/EventArray"),
    "loss": ("loss", "gradient_magnitude", "variance"),
    "frame_id": ("frame_id", "frame_from_file", "frame_from_argument"),
    "pose_message_type": ("pose_message_type", "nav_msgs/Odometry", "geometry_msgs/PoseStamped"),
    "pose_source": ("pose_source", "tf", "topic"),
    "world_frame": ("world_frame", "world_from_file", "world_from_argument"),
    "use_sim_time": ("use_sim_time", True, "false"),
}
#: what the file sets besides: a parameter no launch argument names
UNNAMED_BY_ARGUMENTS = {"window_events": 12345, "calibration.fx": 321.0}
#: the nodes that take a parameter file, and the launch argument naming it
PARAMETER_FILE_ARGUMENTS = ("params_file", "depth_params_file")
ESTIMATING_NODES = ("angular_velocity_node", "optical_flow_node", "depth_node")


@pytest.fixture
def ament_prefix(tmp_path, monkeypatch) -> Path:
    """An ament prefix holding this checkout's focus_ros share (config/ linked), first on
    AMENT_PREFIX_PATH: what get_package_share_directory finds for the launch files here."""
    prefix = tmp_path / "prefix"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "focus_ros").write_text("")
    (prefix / "share" / "focus_ros").mkdir()
    (prefix / "share" / "focus_ros" / "config").symlink_to(REPOSITORY_ROOT / "config")
    search_path = [str(prefix)] + ([os.environ["AMENT_PREFIX_PATH"]] if os.environ.get("AMENT_PREFIX_PATH") else [])
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join(search_path))
    return prefix


@pytest.fixture
def user_parameter_file(tmp_path) -> Path:
    values = {parameter: in_file for parameter, in_file, _ in OVERRIDABLE.values()}
    values.update(UNNAMED_BY_ARGUMENTS)
    nested: dict = {}
    for name, value in values.items():
        *path, leaf = name.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    path = tmp_path / "user.yaml"
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": nested}}))
    return path


def effective_parameters(node) -> dict:
    """The parameters a node starts with: its parameter files and dicts in order, later ones winning
    (as rcl applies several --params-file)."""
    merged: dict = {}
    for kind, source in node.sources:
        merged.update(parameters_from_file(source, node.name) if kind == "file" else source)
    return merged


def resolve_with_stand_in(launch_file: Path, arguments: dict) -> list:
    return [(node.executable, effective_parameters(node)) for node in load_launch_file(launch_file, arguments).nodes
            if node.package == PACKAGE and node.executable in ESTIMATING_NODES]


def resolve_with_launch(launch_file: Path, arguments: dict) -> list:
    """The same with ROS 2 launch itself: the description evaluated in a LaunchContext (arguments
    declared, opaque functions run, conditions checked), each launch_ros Node's parameters
    evaluated by launch_ros (files and dicts in order)."""
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.launch_description_sources import get_launch_description_from_python_launch_file
    from launch_ros.actions import Node
    from launch_ros.utilities import evaluate_parameters

    context = LaunchContext()
    context.launch_configurations.update(arguments)
    found = []

    def visit(entities):
        for entity in entities:
            condition = getattr(entity, "condition", None)
            if condition is not None and not condition.evaluate(context):
                continue
            if isinstance(entity, DeclareLaunchArgument):
                entity.visit(context)
            elif isinstance(entity, OpaqueFunction):
                visit(entity.visit(context) or [])
            elif isinstance(entity, Node) and entity.node_package == PACKAGE \
                    and entity.node_executable in ESTIMATING_NODES:
                name = entity.node_executable
                merged: dict = {}
                for source in evaluate_parameters(context, entity._Node__parameters):  # noqa: SLF001
                    merged.update(parameters_from_file(Path(source), name) if isinstance(source, (str, Path))
                                  else source)
                found.append((name, merged))

    visit(get_launch_description_from_python_launch_file(str(launch_file)).entities)
    return found


RESOLVERS = {"stand-in": resolve_with_stand_in, "launch": resolve_with_launch}


@pytest.mark.parametrize("resolver", list(RESOLVERS))
@pytest.mark.parametrize("source", LAUNCH_SOURCES, ids=lambda p: p.name)
def test_the_parameter_file_survives_every_launch_file(source, resolver, ament_prefix, user_parameter_file,
                                                       sample_bag_argument):
    """A user's parameter file given to a launch file: with no other argument every value in it
    reaches the node unchanged (no argument's default replaces it); with every overriding argument
    given, those and only those replace the file's values."""
    if resolver == "launch":
        pytest.importorskip("launch_ros", reason="ROS 2 launch is not installed (not on PyPI): the stand-in "
                                                 "alone checks the launch files here")
    resolve = RESOLVERS[resolver]
    declared = set(re.findall(r"DeclareLaunchArgument\(\s*[\"'](\w+)[\"']", source.read_text()))
    base = {name: str(user_parameter_file) for name in PARAMETER_FILE_ARGUMENTS if name in declared}
    base.update({name: sample_bag_argument for name in ("bag",) if name in declared})
    base.update({name: "true" for name in ("depth",) if name in declared})  # replay: the depth node too
    assert any(name in declared for name in PARAMETER_FILE_ARGUMENTS), f"{source.name} takes no parameter file"
    in_file = {parameter: value for parameter, value, _ in OVERRIDABLE.values()}
    in_file.update(UNNAMED_BY_ARGUMENTS)

    nodes = resolve(source, base)
    assert nodes, f"{source.name} starts no estimating node"
    for executable, parameters in nodes:
        changed = {name: (value, parameters.get(name)) for name, value in in_file.items()
                   if parameters.get(name) != value}
        assert not changed, f"{source.name} without arguments: {executable} gets {changed} instead of the file's"

    given = {argument: str(argument_value) for argument, (_, _, argument_value) in OVERRIDABLE.items()
             if argument in declared}
    assert "use_sim_time" in given, f"{source.name} does not take use_sim_time"
    nodes = resolve(source, {**base, **given})
    for executable, parameters in nodes:
        for name, value in in_file.items():
            overriding = [argument for argument, (parameter, _, _) in OVERRIDABLE.items()
                          if parameter == name and argument in given]
            # an argument may be meant for one of the nodes only (replay: loss for the angular velocity node)
            allowed = [value] + ([yaml.safe_load(given[overriding[0]])] if overriding else [])
            assert parameters.get(name) in allowed, \
                f"{source.name} with {given}: {executable}.{name} = {parameters.get(name)!r}, expected one of {allowed}"
    main = nodes[0][1]
    for argument in given:
        parameter, _, argument_value = OVERRIDABLE[argument]
        assert main.get(parameter) == yaml.safe_load(argument_value), \
            f"{source.name}: argument {argument} does not reach {nodes[0][0]}"


def test_rviz_takes_its_fixed_frame_from_an_argument(ament_prefix, sample_bag_argument):
    """Every launch file that starts rviz passes ``--fixed-frame`` with the ``fixed_frame`` argument."""
    for source in LAUNCH_SOURCES:
        declared = set(re.findall(r"DeclareLaunchArgument\(\s*[\"'](\w+)[\"']", source.read_text()))
        arguments = {name: value for name, value in (("bag", sample_bag_argument), ("rviz", "true"))
                     if name in declared}
        rviz = [node for node in load_launch_file(source, arguments).nodes if node.package == "rviz2"]
        if not rviz:
            continue
        assert "fixed_frame" in declared, source.name
        given = [node for node in load_launch_file(source, {**arguments, "fixed_frame": "odom"}).nodes
                 if node.package == "rviz2"]
        for node in rviz + given:
            assert "--fixed-frame" in node.arguments, (source.name, node.arguments)
        assert given[0].arguments[given[0].arguments.index("--fixed-frame") + 1] == "odom", source.name
        assert rviz[0].arguments[rviz[0].arguments.index("--fixed-frame") + 1], source.name
        if "world_frame" in declared:  # rviz shows the clouds' frame unless told otherwise
            in_world = [node for node in load_launch_file(source, {**arguments, "world_frame": "map"}).nodes
                        if node.package == "rviz2"][0]
            assert in_world.arguments[in_world.arguments.index("--fixed-frame") + 1] == "map", source.name


@pytest.fixture
def sample_bag_argument(tmp_path) -> str:
    """A path for the replay launch file's required ``bag`` argument (these checks do not start the nodes)."""
    return str(tmp_path / "some.bag")


SHIPPED_PARAMETER_FILES = sorted((REPOSITORY_ROOT / "config").glob("*.yaml"))


@pytest.mark.parametrize("parameter_file", SHIPPED_PARAMETER_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("source", LAUNCH_SOURCES, ids=lambda p: p.name)
def test_the_shipped_parameter_files_survive_every_launch_file(source, parameter_file, ament_prefix,
                                                               sample_bag_argument):
    """Each config/*.yaml given as the parameter file of each launch file (stand-in), with no other
    argument: every value it sets for all nodes (``/**``) or for the node by name reaches the node."""
    declared = set(re.findall(r"DeclareLaunchArgument\(\s*[\"'](\w+)[\"']", source.read_text()))
    arguments = {name: str(parameter_file) for name in PARAMETER_FILE_ARGUMENTS if name in declared}
    arguments.update({name: sample_bag_argument for name in ("bag",) if name in declared})
    for executable, parameters in resolve_with_stand_in(source, arguments):
        in_file = parameters_from_file(parameter_file, executable)
        changed = {name: (value, parameters.get(name)) for name, value in in_file.items()
                   if parameters.get(name) != value}
        assert not changed, f"{source.name} params_file:={parameter_file.name}: {executable} gets {changed}"

"""A stand-in for `launch` / `launch_ros`, to evaluate launch files where ROS 2 launch is absent.

`launch` and `launch_ros` are not installable from PyPI (docs/design.md, section 4 "ROS 2 from PyPI
wheels and the serialization speed trap"), so the tests load each launch file with these modules
in their place. The stand-in records what the launch file builds and resolves it the way
launch_ros does:

- a ``LaunchConfiguration`` is the value given on the command line (``name:=value``) or the
  ``DeclareLaunchArgument`` default; a missing required argument is an error;
- a parameter given as a substitution is the substituted text read as YAML (launch_ros'
  ``evaluate_parameters``: ``rate:=1`` reaches the node as the *integer* 1, ``1.0`` as a double,
  ``true`` as a bool); a ``ParameterValue`` with ``value_type`` is converted to that type;
  nested dicts become dotted names;
- ``IfCondition`` / ``UnlessCondition`` accept true/false/1/0 (any case), like launch;
- an ``OpaqueFunction`` is called with a context whose ``launch_configurations`` hold the
  arguments as known at that point, and the actions it returns are evaluated in its place;
- a node's command line: ``<prefix>/lib/<package>/<executable> <arguments> --ros-args
  -r __node:=<name> [-r __ns:=<namespace>] --params-file ... -r from:=to``, parameter files
  in the order given, a dict written to a temporary YAML file (``/**: ros__parameters:``).

What it cannot prove: that real `launch` accepts the file (keyword names, action types it does
not model); anything it does not model (``IncludeLaunchDescription``, event handlers, ...)
fails loudly here, naming the missing piece, rather than passing unchecked.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import yaml

MODULES = ("launch", "launch.actions", "launch.substitutions", "launch.conditions",
           "launch_ros", "launch_ros.actions", "launch_ros.substitutions",
           "launch_ros.parameter_descriptions")


class LaunchFileError(Exception):
    """A launch file that cannot be evaluated (missing argument, unsupported construct, bad condition)."""


# ---------------------------------------------------------------- substitutions

class Substitution:
    def perform(self, arguments: dict) -> str:
        raise NotImplementedError


class TextSubstitution(Substitution):
    def __init__(self, *, text: str):
        self.text = text

    def perform(self, arguments):
        return self.text


class LaunchConfiguration(Substitution):
    def __init__(self, variable_name, default=None):
        self.name = variable_name
        self.default = default

    def perform(self, arguments):
        if isinstance(arguments, LaunchContext):
            arguments = arguments.launch_configurations
        if self.name in arguments:
            return arguments[self.name]
        if self.default is not None:
            return perform(self.default, arguments)
        raise LaunchFileError(f"launch argument '{self.name}' was not given and has no default")


class PathJoinSubstitution(Substitution):
    def __init__(self, substitutions):
        self.parts = list(substitutions)

    def perform(self, arguments):
        return str(Path(*[perform(part, arguments) for part in self.parts]))


class PythonExpression(Substitution):
    """launch's PythonExpression: the substituted text evaluated by Python, with ``math`` (or the
    ``python_modules`` named) importable, the result as text."""

    def __init__(self, expression, python_modules=("math",)):
        self.expression = expression
        self.modules = python_modules

    def perform(self, arguments):
        import importlib

        modules = [perform(m, arguments) for m in (self.modules if isinstance(self.modules, (list, tuple))
                                                   else [self.modules])]
        namespace = {name: importlib.import_module(name) for name in modules}
        return str(eval(perform(self.expression, arguments), namespace))


class FindPackageShare(Substitution):
    def __init__(self, package):
        self.package = package

    def perform(self, arguments):
        from ament_index_python.packages import get_package_share_directory

        return get_package_share_directory(perform(self.package, arguments))


def perform(value, arguments) -> str:
    """Text of a substitution, a string, or a list of them (concatenated, as launch does);
    ``arguments``: the launch configurations (name -> text), or a :class:`LaunchContext`."""
    if isinstance(arguments, LaunchContext):
        arguments = arguments.launch_configurations
    if isinstance(value, str):
        return value
    if isinstance(value, Substitution):
        return value.perform(arguments)
    if isinstance(value, (list, tuple)):
        return "".join(perform(part, arguments) for part in value)
    raise LaunchFileError(f"cannot substitute {value!r} ({type(value).__name__})")


def _is_substitution(value) -> bool:
    return isinstance(value, Substitution) or (
        isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, Substitution)) for v in value)
        and any(isinstance(v, Substitution) for v in value))


# ---------------------------------------------------------------- conditions and actions

class IfCondition:
    def __init__(self, predicate_expression):
        self.predicate = predicate_expression

    def evaluate(self, arguments) -> bool:
        text = perform(self.predicate, arguments).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise LaunchFileError(f"condition expression {text!r} is not one of true, false, 1, 0")


class UnlessCondition(IfCondition):
    def evaluate(self, arguments) -> bool:
        return not super().evaluate(arguments)


class DeclareLaunchArgument:
    def __init__(self, name, *, default_value=None, description="", choices=None, **unmodelled):
        _refuse(unmodelled, "DeclareLaunchArgument")
        self.name, self.default_value, self.description, self.choices = name, default_value, description, choices


class GroupAction:
    def __init__(self, actions, *, condition=None, scoped=True, forwarding=True, launch_configurations=None):
        if launch_configurations:
            raise LaunchFileError("the launch stand-in does not model GroupAction(launch_configurations=...)")
        self.actions, self.condition = list(actions), condition


class OpaqueFunction:
    """launch's OpaqueFunction: ``function(context, *args, **kwargs)`` returns the actions to
    run, once the launch arguments are known (``context.launch_configurations``: name -> text)."""

    def __init__(self, *, function, args=None, kwargs=None, condition=None):
        self.function, self.condition = function, condition
        self.args, self.kwargs = list(args or []), dict(kwargs or {})


@dataclass
class LaunchContext:
    """What an OpaqueFunction is given: the launch configurations (argument name -> value text)."""

    launch_configurations: dict

    def perform_substitution(self, substitution) -> str:
        return perform(substitution, self.launch_configurations)


class LogInfo:
    def __init__(self, *, msg, condition=None):
        self.msg, self.condition = msg, condition


class LaunchDescription:
    def __init__(self, initial_entities=None, *, deprecated_reason=None):
        self.entities = list(initial_entities or [])

    def add_action(self, action) -> None:
        self.entities.append(action)


class ParameterValue:
    def __init__(self, value, *, value_type=None):
        self.value, self.value_type = value, value_type


class ParameterFile:
    def __init__(self, param_file, *, allow_substs=False):
        self.param_file, self.allow_substs = param_file, allow_substs


class Node:
    def __init__(self, *, executable, package=None, name=None, namespace=None, exec_name=None,
                 parameters=None, remappings=None, ros_arguments=None, arguments=None, output=None,
                 condition=None, respawn=False, respawn_delay=None, emulate_tty=False, **unmodelled):
        _refuse(unmodelled, "launch_ros.actions.Node")
        self.package, self.executable, self.name, self.namespace = package, executable, name, namespace
        self.parameters = list(parameters or [])
        self.remappings = list(remappings or [])
        self.ros_arguments = list(ros_arguments or [])
        self.arguments = list(arguments or [])
        self.condition = condition


def _refuse(unmodelled: dict, what: str) -> None:
    if unmodelled:
        raise LaunchFileError(f"the launch stand-in does not model {what}({', '.join(unmodelled)}=...)")


# ---------------------------------------------------------------- evaluation

@dataclass
class ResolvedNode:
    """A node of a launch description with every substitution performed."""

    package: str
    executable: str
    name: str | None
    namespace: str | None
    arguments: list[str]
    ros_arguments: list[str]
    parameter_files: list[Path]                       # in order, files named by the launch file
    parameters: dict = field(default_factory=dict)    # from dicts, typed as launch_ros types them
    remappings: list[tuple[str, str]] = field(default_factory=list)
    sources: list = field(default_factory=list)       # ("file", Path) / ("dict", {...}) in order

    def command(self, prefix: Path, dict_file_for) -> list[str]:
        """The command line launch_ros would run; dict_file_for(dict) -> path of its YAML file."""
        command = [str(prefix / "lib" / self.package / self.executable), *self.arguments, "--ros-args",
                   *self.ros_arguments]
        if self.name:
            command += ["-r", f"__node:={self.name}"]
        if self.namespace:
            command += ["-r", f"__ns:={self.namespace}"]
        for kind, source in self.sources:
            command += ["--params-file", str(source if kind == "file" else dict_file_for(source))]
        for source, target in self.remappings:
            command += ["-r", f"{source}:={target}"]
        return command


@dataclass
class ResolvedLaunch:
    arguments: dict[str, DeclareLaunchArgument]
    nodes: list[ResolvedNode]


def _parameter_value(value, arguments):
    """The value launch_ros hands the node for one entry of a parameter dict."""
    if isinstance(value, ParameterValue):
        if value.value_type is str:
            return perform(value.value, arguments)
        loaded = _parameter_value(value.value, arguments)
        return value.value_type(loaded) if value.value_type is not None else loaded
    if _is_substitution(value):
        text = perform(value, arguments)
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            raise LaunchFileError(f"parameter value {text!r} is not valid YAML (launch_ros refuses it; "
                                  "wrap it in ParameterValue(..., value_type=str))") from None
        if isinstance(loaded, list) and len({type(item) for item in loaded}) > 1:
            return text  # launch_ros keeps a list of mixed types as the text
        return loaded if isinstance(loaded, (bool, int, float, str, list)) else text
    if isinstance(value, (list, tuple)):
        return [_parameter_value(item, arguments) for item in value]
    if isinstance(value, (bool, int, float, str)):
        return value
    raise LaunchFileError(f"the launch stand-in does not model parameter value {value!r}")


def _flatten(parameters: dict, arguments, prefix="") -> dict:
    flat = {}
    for key, value in parameters.items():
        name = prefix + perform(key, arguments)
        if isinstance(value, dict):
            flat.update(_flatten(value, arguments, name + "."))
        else:
            flat[name] = _parameter_value(value, arguments)
    return flat


def _resolve_node(node: Node, arguments) -> ResolvedNode:
    resolved = ResolvedNode(
        package=perform(node.package, arguments), executable=perform(node.executable, arguments),
        name=perform(node.name, arguments) if node.name is not None else None,
        namespace=perform(node.namespace, arguments) if node.namespace is not None else None,
        arguments=[perform(a, arguments) for a in node.arguments],
        ros_arguments=[perform(a, arguments) for a in node.ros_arguments],
        parameter_files=[],
        remappings=[(perform(a, arguments), perform(b, arguments)) for a, b in node.remappings])
    for entry in node.parameters:
        if isinstance(entry, dict):
            values = _flatten(entry, arguments)
            resolved.parameters.update(values)
            resolved.sources.append(("dict", values))
        else:
            path = Path(perform(entry.param_file if isinstance(entry, ParameterFile) else entry, arguments))
            resolved.parameter_files.append(path)
            resolved.sources.append(("file", path))
    return resolved


def _walk(entities, arguments, declared, nodes) -> None:
    for entity in entities:
        condition = getattr(entity, "condition", None)
        if condition is not None and not condition.evaluate(arguments):
            continue
        if isinstance(entity, DeclareLaunchArgument):
            declared[entity.name] = entity
            if entity.name not in arguments and entity.default_value is not None:
                arguments[entity.name] = perform(entity.default_value, arguments)
            if entity.choices and entity.name in arguments and arguments[entity.name] not in entity.choices:
                raise LaunchFileError(f"launch argument {entity.name}:={arguments[entity.name]} is not one of "
                                      f"{entity.choices}")
        elif isinstance(entity, Node):
            nodes.append(_resolve_node(entity, arguments))
        elif isinstance(entity, GroupAction):
            _walk(entity.actions, dict(arguments), declared, nodes)
        elif isinstance(entity, OpaqueFunction):
            actions = entity.function(LaunchContext(dict(arguments)), *entity.args, **entity.kwargs)
            _walk(actions or [], arguments, declared, nodes)
        elif isinstance(entity, LogInfo):
            pass
        else:
            raise LaunchFileError(f"the launch stand-in does not model {type(entity).__name__}")


def _module(name: str, members: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(members)

    def missing(attribute):
        raise AttributeError(f"the launch stand-in (test/launch_stand_in.py) does not model {name}.{attribute}")

    module.__getattr__ = missing
    return module


def stand_in_modules() -> dict[str, types.ModuleType]:
    """The modules to put in sys.modules in place of launch / launch_ros."""
    return {
        "launch": _module("launch", {"LaunchDescription": LaunchDescription}),
        "launch.actions": _module("launch.actions", {"DeclareLaunchArgument": DeclareLaunchArgument,
                                                     "GroupAction": GroupAction, "LogInfo": LogInfo,
                                                     "OpaqueFunction": OpaqueFunction}),
        "launch.substitutions": _module("launch.substitutions", {
            "LaunchConfiguration": LaunchConfiguration, "TextSubstitution": TextSubstitution,
            "PathJoinSubstitution": PathJoinSubstitution, "PythonExpression": PythonExpression}),
        "launch.conditions": _module("launch.conditions", {"IfCondition": IfCondition,
                                                           "UnlessCondition": UnlessCondition}),
        "launch_ros": _module("launch_ros", {}),
        "launch_ros.actions": _module("launch_ros.actions", {"Node": Node}),
        "launch_ros.substitutions": _module("launch_ros.substitutions", {"FindPackageShare": FindPackageShare}),
        "launch_ros.parameter_descriptions": _module("launch_ros.parameter_descriptions", {
            "ParameterValue": ParameterValue, "ParameterFile": ParameterFile}),
    }


def load_launch_file(path: Path, launch_arguments: dict[str, str] | None = None) -> ResolvedLaunch:
    """Evaluate ``generate_launch_description()`` of a launch file with the stand-in modules,
    as ``ros2 launch <file> name:=value ...`` would with ``launch_arguments``."""
    saved = {name: sys.modules.get(name) for name in MODULES}
    sys.modules.update(stand_in_modules())
    try:
        spec = importlib.util.spec_from_file_location(f"launch_file_{path.stem.replace('.', '_')}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    arguments = dict(launch_arguments or {})
    declared: dict[str, DeclareLaunchArgument] = {}
    nodes: list[ResolvedNode] = []
    _walk(description.entities, arguments, declared, nodes)
    unknown = set(launch_arguments or {}) - set(declared)
    if unknown:
        raise LaunchFileError(f"{path.name} declares no argument {', '.join(sorted(unknown))}")
    return ResolvedLaunch(declared, nodes)

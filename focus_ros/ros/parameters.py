"""Parameters as users type them: an integer is accepted where a double (or a string) is declared.

``ros2 launch ... rate:=1``, ``ros2 run ... -p rate:=1``, a YAML file with ``rate: 1`` and
``ros2 param set /node rate 1`` all hand the node an *integer*; rclpy refuses it for a
parameter declared as a double (InvalidParameterTypeException at start-up, "Wrong parameter
type" at run time). :class:`FocusNode` converts such integers (and integer arrays for
double arrays) to doubles before rclpy checks the type. Likewise an integer given for a
string parameter becomes its digits (``estimator_cpus:=1``, a CPU list, is the string "1").
Nothing else changes: a string for a double, or a double for an integer or a string, is
still refused with rclpy's message.

Every focus_ros node derives from :class:`FocusNode` instead of ``rclpy.node.Node``, and
declares its parameters from settings classes (:mod:`focus_ros.settings`) with
:func:`declare_settings`: the name, default, description and range come from the one declaration;
:func:`settings_from_parameters` builds the settings back from the parameters' values.
"""

from __future__ import annotations

from rclpy.node import Node
from rclpy.parameter import Parameter
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

from focus_ros.settings import Setting, declared, from_parameter_value, settings_from_values, to_parameter_value

#: declared type -> (type a user may give instead, conversion)
_WIDENING = {
    ParameterType.PARAMETER_DOUBLE: (Parameter.Type.INTEGER, float),
    ParameterType.PARAMETER_DOUBLE_ARRAY: (Parameter.Type.INTEGER_ARRAY, lambda values: [float(v) for v in values]),
    ParameterType.PARAMETER_STRING: (Parameter.Type.INTEGER, str),
}


def descriptor(description: str, *, integer_range=None, float_range=None, read_only=False,
               dynamic_typing=False) -> ParameterDescriptor:
    """A ParameterDescriptor with a description and an optional integer or float range."""
    result = ParameterDescriptor(description=description, read_only=read_only, dynamic_typing=dynamic_typing)
    if integer_range:
        result.integer_range = [IntegerRange(from_value=integer_range[0], to_value=integer_range[1], step=1)]
    if float_range:
        result.floating_point_range = [FloatingPointRange(from_value=float_range[0], to_value=float_range[1],
                                                          step=0.0)]
    return result


def setting_descriptor(item: Setting) -> ParameterDescriptor:
    """The ParameterDescriptor of a declared setting: its description, its range (an integer
    range for an int, a float range for a float; an optional setting's ``unset`` value admitted
    too, else ROS would refuse its own default) and whether it is read-only."""
    low, high = item.declaration.minimum, item.declaration.maximum
    bounded = low is not None or high is not None
    unset = item.declaration.unset if item.optional else None
    if bounded and isinstance(unset, (int, float)) and not isinstance(unset, bool):  # the range admits it too
        low, high = (None if low is None else min(low, unset)), (None if high is None else max(high, unset))
    integer_range = float_range = None
    if bounded and item.kind is int:
        integer_range = (int(low) if low is not None else -2**63, int(high) if high is not None else 2**63 - 1)
    elif bounded and item.kind is float:
        float_range = (float(low) if low is not None else -1e308, float(high) if high is not None else 1e308)
    return descriptor(item.description(), integer_range=integer_range, float_range=float_range,
                      read_only=item.declaration.read_only)


def declare_settings(node: Node, cls, *, exclude=(), defaults: dict | None = None) -> tuple[Setting, ...]:
    """Declare a ROS parameter for every declared setting of ``cls`` that has one (not those named
    in ``exclude``); ``defaults``: other defaults than the declaration's, by setting name. Returns
    the settings declared."""
    exclude, defaults = set(exclude), defaults or {}
    chosen = tuple(item for item in declared(cls) if item.parameter is not None and item.name not in exclude)
    for item in chosen:
        default = defaults[item.name] if item.name in defaults else item.default
        node.declare_parameter(item.parameter, to_parameter_value(item, default), setting_descriptor(item))
    return chosen


def settings_from_parameters(node: Node, cls, base=None, *, overrides: dict | None = None, exclude=()):
    """``base`` (default ``cls()``) with the values of the parameters :func:`declare_settings`
    declared; ``overrides``: parameter values about to be set (by parameter name), taken instead.
    ValueError saying why the values are unusable."""
    overrides, exclude = overrides or {}, set(exclude)
    values = {}
    for item in declared(cls):
        if item.parameter is None or item.name in exclude:
            continue
        raw = overrides[item.parameter] if item.parameter in overrides else node.get_parameter(item.parameter).value
        values[item.name] = from_parameter_value(item, raw)
    # a value refused is named as the user knows it: the parameter (reference_time), not the field (t_ref)
    return settings_from_values(cls, values, base, name_of=lambda item: item.parameter)


def widened(parameter: Parameter, declared_type: int) -> Parameter:
    """``parameter`` converted to ``declared_type`` where that is lossless (an integer to a double
    or to its digits), else unchanged."""
    accepted = _WIDENING.get(declared_type)
    if accepted is None or parameter.type_ != accepted[0]:
        return parameter
    return Parameter(parameter.name, Parameter.Type(declared_type), accepted[1](parameter.value))


class FocusNode(Node):
    """``rclpy.node.Node`` whose double and string parameters also take integers (see the module docstring)."""

    def declare_parameters(self, namespace, parameters, ignore_override=False):
        if not ignore_override:
            for entry in parameters:
                if len(entry) < 2 or isinstance(entry[1], Parameter.Type):
                    declared_type = getattr(entry[1], "value", None) if len(entry) > 1 else None
                else:
                    declared_type = Parameter.Type.from_parameter_value(entry[1]).value
                name = f"{namespace}.{entry[0]}" if namespace else entry[0]
                override = self._parameter_overrides.get(name)
                if override is not None and declared_type is not None:
                    self._parameter_overrides[name] = widened(override, declared_type)
        return super().declare_parameters(namespace, parameters, ignore_override)

    def set_parameters(self, parameter_list):
        return super().set_parameters(self._widened(parameter_list))

    def set_parameters_atomically(self, parameter_list):
        return super().set_parameters_atomically(self._widened(parameter_list))

    def _widened(self, parameter_list):
        return [widened(p, self._descriptors[p.name].type) if p.name in self._descriptors else p
                for p in parameter_list]

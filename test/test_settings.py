"""Settings declared once (focus_ros.settings): the one declaration gives the command line's options,
the ROS parameters with their ranges, the parameters template and the docs' tables — and the
files in the repository are what the code makes of it (a drift fails here)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest
import yaml

from conftest import flattened_parameters
from focus_ros.cli._settings import add_setting_options, settings_from_options
from focus_ros.settings import declared, from_parameter_value, setting, settings_from_values, to_parameter_value


@dataclass(frozen=True)
class Example:
    """A settings class with one setting of every kind the declarations support."""

    planes: int = setting(100, "depth planes", minimum=2, maximum=1000)
    z_min_m: float = setting(0.3, "nearest depth searched", unit="m", minimum=0.01, option="--z-min")
    loss: str = setting("variance", "focus loss", choices=("variance", "max_vote"))
    use_polarity: bool = setting(False, "votes carry the polarity", option="--polarity")
    auto_depth_range: bool = setting(True, "planes from the scene", option="--fixed-depth-range",
                                     negated_option=True)
    refine_peak: bool = setting(True, "sub-plane depth")
    blur_sigma_px: float | None = setting(None, "blur of the image", unit="px", minimum=0.0, unset=-1.0)
    distortion: tuple[float, ...] = setting((0.0, 0.0), "k1 k2", parameter="calibration.distortion")
    internal: str = setting("x", "not on the command line", option=None, parameter=None)
    not_a_setting: int = 7


def parse(argv):
    parser = argparse.ArgumentParser(prog="example", exit_on_error=False)
    add_setting_options(parser, Example)
    return settings_from_options(Example, parser.parse_args(argv))


def test_a_declaration_resolves_its_kind_names_and_description():
    items = {item.name: item for item in declared(Example)}
    assert "not_a_setting" not in items and len(items) == 9
    assert items["planes"].kind is int and items["z_min_m"].kind is float and items["distortion"].kind is list
    assert items["blur_sigma_px"].optional and not items["planes"].optional
    assert (items["z_min_m"].option, items["z_min_m"].parameter) == ("--z-min", "z_min_m")
    assert (items["refine_peak"].option, items["distortion"].parameter) == ("--refine-peak", "calibration.distortion")
    assert (items["internal"].option, items["internal"].parameter) == (None, None)
    assert items["z_min_m"].description() == "nearest depth searched [m; >= 0.01]"
    assert items["planes"].description() == "depth planes [2 to 1000]"


def test_values_outside_the_range_or_choices_are_refused_naming_the_setting():
    assert settings_from_values(Example, {"planes": 5}).planes == 5
    with pytest.raises(ValueError, match=r"planes must be 2 to 1000, got 1001"):
        settings_from_values(Example, {"planes": 1001})
    with pytest.raises(ValueError, match=r"loss 'l2' is not one of: variance, max_vote"):
        settings_from_values(Example, {"loss": "l2"})
    with pytest.raises(ValueError, match=r"z_min_m must be >= 0.01, got nan"):
        settings_from_values(Example, {"z_min_m": float("nan")})


def test_parameter_values_stand_for_none_and_tuples():
    items = {item.name: item for item in declared(Example)}
    blur, distortion = items["blur_sigma_px"], items["distortion"]
    assert to_parameter_value(blur, None) == -1.0 and from_parameter_value(blur, -1.0) is None
    assert from_parameter_value(blur, 2) == 2.0 and isinstance(from_parameter_value(blur, 2), float)
    assert to_parameter_value(distortion, (0.1, 0.2)) == [0.1, 0.2]
    assert from_parameter_value(distortion, [0.1, 0.2]) == (0.1, 0.2)


def test_command_line_options_come_from_the_declarations():
    assert parse([]) == Example()
    chosen = parse(["--planes", "50", "--z-min", "0.5", "--loss", "max_vote", "--polarity", "--fixed-depth-range",
                    "--no-refine-peak", "--blur-sigma-px", "1.5", "--distortion", "0.1", "-0.2"])
    assert chosen == Example(planes=50, z_min_m=0.5, loss="max_vote", use_polarity=True, auto_depth_range=False,
                             refine_peak=False, blur_sigma_px=1.5, distortion=(0.1, -0.2))


@pytest.mark.parametrize("argv, words", [(["--planes", "1"], "--planes must be 2 to 1000, got 1"),
                                         (["--planes", "many"], "not an int: 'many'"),
                                         (["--loss", "l2"], "invalid choice: 'l2'"),
                                         (["--internal", "y"], "unrecognized arguments")])
def test_command_line_refuses_values_outside_the_declaration(argv, words):
    with pytest.raises((argparse.ArgumentError, SystemExit)) as raised:
        parse(argv)
    assert words in str(raised.value) or raised.type is SystemExit


def test_command_line_help_shows_unit_range_and_default(capsys):
    parser = argparse.ArgumentParser(prog="example")
    add_setting_options(parser, Example)
    text = " ".join(parser.format_help().split())
    assert "--z-min M nearest depth searched [m; >= 0.01] (default 0.3)" in text
    assert "--planes PLANES depth planes [2 to 1000] (default 100)" in text


# ----------------------------------------------------------------- the ROS side
rclpy = pytest.importorskip("rclpy", reason="rclpy is not installed (make setup installs it)")


@pytest.fixture
def context():
    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    context.try_shutdown()


def test_ros_parameters_come_from_the_declarations_with_their_ranges(context):
    from rclpy.exceptions import InvalidParameterValueException
    from rclpy.parameter import Parameter

    from focus_ros.ros.parameters import FocusNode, declare_settings, settings_from_parameters

    node = FocusNode("settings_probe", context=context,
                     parameter_overrides=[Parameter("planes", value=50), Parameter("blur_sigma_px", value=-1.0)])
    try:
        chosen = declare_settings(node, Example)
        assert [item.parameter for item in chosen] == ["planes", "z_min_m", "loss", "use_polarity", "auto_depth_range",
                                                       "refine_peak", "blur_sigma_px", "calibration.distortion"]
        described = node.describe_parameter("planes")
        assert (described.integer_range[0].from_value, described.integer_range[0].to_value) == (2, 1000)
        assert node.describe_parameter("z_min_m").floating_point_range[0].from_value == 0.01
        assert node.describe_parameter("z_min_m").description == "nearest depth searched [m; >= 0.01]"
        assert settings_from_parameters(node, Example) == Example(planes=50)
        assert not node.set_parameters([Parameter("planes", value=1)])[0].successful  # outside the range
        with pytest.raises(ValueError, match="loss 'l2' is not one of"):
            settings_from_parameters(node, Example, overrides={"loss": "l2"})
    finally:
        node.destroy_node()
    refusing = FocusNode("settings_probe_range", context=context, parameter_overrides=[Parameter("planes", value=1)])
    try:
        with pytest.raises(InvalidParameterValueException):
            declare_settings(refusing, Example)  # a value from a launch file outside the range: refused at start
    finally:
        refusing.destroy_node()


# ----------------------------------------------------------------- the documents in the repository
def test_the_parameters_template_and_reference_are_what_the_code_makes():
    """config/generic_template.yaml and docs/nodes.md's tables, regenerated from the declarations,
    equal the files in the repository (`python -m focus_ros.ros.parameter_reference --write`
    brings them up to date after a change of a setting)."""
    from focus_ros.ros.parameter_reference import REPOSITORY, generated_files

    stale = [str(path.relative_to(REPOSITORY)) for path, text in generated_files().items() if path.read_text() != text]
    assert stale == [], "run `python -m focus_ros.ros.parameter_reference --write`"


@pytest.mark.parametrize("node_name", ["angular_velocity_node", "optical_flow_node", "depth_node"])
def test_every_parameter_a_node_declares_is_in_the_template_at_its_default(node_name, context):
    """A real node's declared parameters (rclpy's own list) are exactly the template's /** block and
    its own block, each at the template's value: no parameter is declared outside the settings'
    declarations."""
    import importlib

    from focus_ros.ros.parameter_reference import NODES, REPOSITORY, TEMPLATE_PATH

    template = yaml.safe_load((REPOSITORY / TEMPLATE_PATH).read_text())
    listed = {**flattened_parameters(template["/**"]["ros__parameters"]),
              **flattened_parameters(template[node_name]["ros__parameters"])}
    module = importlib.import_module(NODES[node_name])
    node_class = next(value for name, value in vars(module).items()
                      if isinstance(value, type) and name.endswith("Node") and value.__module__ == module.__name__)
    node = node_class(context=context)
    try:
        names = set(node._parameters) - {"use_sim_time", "start_type_description_service"}
        assert sorted(names) == sorted(listed)
        values = {name: node.get_parameter(name).value for name in names}
        assert {name: (list(value) if isinstance(value, (list, tuple)) else value) for name, value in values.items()} \
            == listed
    finally:
        node.stop()
        node.destroy_node()


def test_a_generated_block_ends_at_its_own_end_marker_never_past_the_next_block():
    """The docs' blocks are replaced between their start and end markers; a block not yet generated
    (no end marker) must not swallow the text up to the next block's end (it once ate a section)."""
    from focus_ros.settings.documents import replace_marked_block

    text = "a\n<!-- parameters: x -->\nprose\n<!-- parameters: y -->\nold\n<!-- /parameters -->\nz"
    text = replace_marked_block(text, "x", "X")
    assert text == "a\n<!-- parameters: x -->\nX\n<!-- /parameters -->\nprose\n" \
                   "<!-- parameters: y -->\nold\n<!-- /parameters -->\nz"
    assert replace_marked_block(text, "y", "Y").endswith("prose\n<!-- parameters: y -->\nY\n<!-- /parameters -->\nz")
    assert replace_marked_block(text, "x", "X") == text
    with pytest.raises(ValueError, match="no '<!-- parameters: w -->' marker"):
        replace_marked_block(text, "w", "W")


@pytest.mark.parametrize("value", [1e-05, 2.5e-10, 1e20, 0.3, 100.0, -1.0, float("inf")])
def test_a_float_in_the_template_reads_back_as_that_float(value):
    """rclpy reads parameter files with PyYAML (YAML 1.1), where 1e-05 is a string: a double
    parameter given so is refused. The template writes every float so it reads back as itself."""
    from focus_ros.settings.documents import yaml_block

    @dataclass(frozen=True)
    class OneFloat:
        tolerance: float = setting(value, "a float")

    (line,) = [line for line in yaml_block(declared(OneFloat)) if not line.lstrip().startswith("#")]
    read = yaml.safe_load(line.strip())["tolerance"]
    assert isinstance(read, float) and read == value

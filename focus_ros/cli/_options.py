"""Command-line options of the angular velocity estimator, shared by the commands that run it
(estimate, evaluate, landscape): generated from the settings' declarations
(:class:`~focus_ros.estimators.angular_velocity.AngularVelocitySettings`, :mod:`focus_ros.settings`),
as the node's ROS parameters are."""

from __future__ import annotations

from typing import Iterable

from focus_ros.cli._settings import add_setting_options, settings_from_options
from focus_ros.estimators.angular_velocity import AngularVelocitySettings
from focus_ros.settings import declared

#: the estimator options every command that runs the estimator offers: --t-ref, --kernel, --warp,
#: --optimizer, --value-tolerance, --warm-start, --blur-sigma
SHARED = ("t_ref", "kernel", "warp", "optimizer", "value_tolerance", "warm_start", "blur_sigma_px")


def _excluded(included: Iterable[str]) -> tuple[str, ...]:
    included = set(included)
    return tuple(item.name for item in declared(AngularVelocitySettings) if item.name not in included)


def option_defaults(settings: AngularVelocitySettings) -> dict:
    """The options' defaults from ``settings``, by setting name (the optimizer's stopping rules as
    they are in effect)."""
    rules = settings.stopping_rules
    values = {item.name: getattr(settings, item.name) for item in declared(AngularVelocitySettings)}
    values.update(max_iterations=rules.max_iterations, gradient_tolerance=rules.gradient_tolerance,
                  value_tolerance=rules.value_tolerance)
    return values


def add_estimator_arguments(parser, defaults: AngularVelocitySettings, included: Iterable[str] = SHARED) -> None:
    """An option for each of the ``included`` settings, with the defaults of ``defaults``; each
    stored under its setting's name."""
    add_setting_options(parser, AngularVelocitySettings, exclude=_excluded(included), defaults=option_defaults(defaults))


def settings_from_arguments(args, defaults: AngularVelocitySettings,
                            included: Iterable[str] = SHARED) -> AngularVelocitySettings:
    """``defaults`` with the values of the options :func:`add_estimator_arguments` added."""
    return settings_from_options(AngularVelocitySettings, args, defaults, exclude=_excluded(included))

"""The simulator's named presets: a scene and a camera motion each, independent of the camera model.

A preset fixes what the camera sees and how it moves (hence the ground truth: ω, poses,
depth); the camera it is seen through (size, intrinsics, distortion) is chosen separately
(:func:`focus_ros.sources.simulator.make_preset`, ``camera=`` one of
:data:`focus_ros.camera.SENSORS`), so every preset runs with every sensor and the motion is
the same for all of them. ``texel_scale`` (texels per scene unit relative to the DAVIS240C
scenes, >= 1) lets a finer sensor see the same shapes with edges sharp at its own pixel
size: the shapes, their positions and intensities do not change with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from focus_ros.sources.scenes import PanoramaScene, PlanarScene
from focus_ros.sources.trajectories import (CAMERA_LOOKING_ALONG_X, ConstantAngularVelocity, LinearPosition,
                                            OscillatingAngularVelocity, OscillatingPosition, Trajectory)

#: camera speed of the slider preset (m/s), along the camera's x axis (right)
SLIDER_SPEED_M_S = 0.25


@dataclass(frozen=True)
class Preset:
    """A named simulation setup.

    scene(seed, texel_scale) -> PanoramaScene or PlanarScene; trajectory(duration_s, seed) ->
    :class:`Trajectory`; default_duration_s (s) when none is given.
    """

    name: str
    description: str
    default_duration_s: float
    scene: Callable = field(repr=False)
    trajectory: Callable = field(repr=False)


def _rotation_trajectory(peak_deg_s: float, ramp_start_fraction: float):
    def trajectory(duration_s: float, seed: int) -> Trajectory:
        profile = OscillatingAngularVelocity(np.deg2rad(peak_deg_s), duration_s, seed,
                                             ramp_start_fraction=ramp_start_fraction)
        return Trajectory(profile, duration_s)
    return trajectory


def _room(seed: int, texel_scale: float) -> PanoramaScene:
    return PanoramaScene.generate(seed, texel_scale=texel_scale)


def _six_dof_trajectory(duration_s: float, seed: int) -> Trajectory:
    profile = OscillatingAngularVelocity(np.deg2rad(60.0), duration_s, seed, ramp_start_fraction=1.0,
                                         frequency_range_hz=(0.3, 0.9))
    return Trajectory(profile, duration_s, OscillatingPosition(0.3, seed))


def _six_dof_near_trajectory(duration_s: float, seed: int) -> Trajectory:
    """Translation up to 0.1 m per axis and rotation up to 60 deg/s about a point in front of the
    slider's panels: a hand-held camera or a robot arm near a scene (depth evaluation, issue 25)."""
    profile = OscillatingAngularVelocity(np.deg2rad(60.0), duration_s, seed, ramp_start_fraction=1.0,
                                         frequency_range_hz=(0.3, 0.9))
    return Trajectory(profile, duration_s, OscillatingPosition(0.1, seed))


def _slider_trajectory(duration_s: float, seed: int) -> Trajectory:
    """The camera slides right (camera +x = world -y) at SLIDER_SPEED_M_S without rotating,
    its path centred on the world origin, in front of :meth:`PlanarScene.slider`."""
    velocity = SLIDER_SPEED_M_S * CAMERA_LOOKING_ALONG_X[:, 0]
    position = LinearPosition(-0.5 * duration_s * velocity, velocity)
    return Trajectory(ConstantAngularVelocity((0.0, 0.0, 0.0)), duration_s, position)


PRESETS = {
    "rotation": Preset("rotation", "rotating in a textured room, ω ramping up to ±700 deg/s on every axis "
                       "(like boxes_rotation)", 10.0, _room, _rotation_trajectory(700.0, 0.05)),
    "rotation_short": Preset("rotation_short", "2 s of rotation up to ±300 deg/s, for demos and CI", 2.0,
                             _room, _rotation_trajectory(300.0, 0.5)),
    "six_dof": Preset("six_dof", "moving in 6-DoF in front of a wall with panels at 1.6-3 m "
                      "(depth maps at 50 Hz)", 5.0,
                      lambda seed, texel_scale: PlanarScene.boxes_in_front_of_wall(seed, texel_scale=texel_scale),
                      _six_dof_trajectory),
    "six_dof_near": Preset("six_dof_near", "moving in 6-DoF (up to 0.1 m, 60 deg/s) in front of the slider's "
                           "panels at 0.55-2.3 m (depth maps at 50 Hz)", 3.0,
                           lambda seed, texel_scale: PlanarScene.slider(seed, texel_scale=texel_scale),
                           _six_dof_near_trajectory),
    "slider": Preset("slider", "sliding right at 0.25 m/s without rotating, in front of textured "
                     "panels at 0.55-2 m and a wall at 2.3 m, like slider_depth (depth maps at 50 Hz)", 3.0,
                     lambda seed, texel_scale: PlanarScene.slider(seed, texel_scale=texel_scale),
                     _slider_trajectory),
}


def preset(name: str) -> Preset:
    """The :data:`PRESETS` entry of ``name``; ValueError listing the known ones otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown simulator preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


__all__ = ["SLIDER_SPEED_M_S", "Preset", "PRESETS", "preset"]

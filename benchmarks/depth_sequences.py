"""The simulated sequences of the depth evaluation and benchmarks, made once and cached.

- ``slider``: the simulator's slider preset (pure translation, 0.25 m/s, panels at 0.55-2.3 m);
- ``six_dof``: the simulator's six_dof preset (translation up to 0.3 m per axis, rotation up
  to 60 deg/s, panels and a wall at 1.1-6.4 m);
- ``six_dof_near``: a second 6-DoF sequence, other seed and motion (the preset of that name,
  seed 1): the slider's scene (panels at 0.55-2.3 m) seen by a camera translating up to 0.1 m
  per axis and rotating up to 60 deg/s (like the sequence a user tried in issue 25).

All DAVIS240C, 3 s by default, seeded; also any simulator preset and the sequences of the wide
depth set (focus_ros/sources/depth_set.py). ``load(name)`` simulates once and keeps the recording
in ``$FOCUS_ROS_CACHE`` (default /tmp/focus_ros_depth_cache) as an .npz file.
"""

from __future__ import annotations

import os
from pathlib import Path

from focus_ros.camera import Calibration
from focus_ros.sources.recording import Recording, load_npz, save_npz

SEQUENCES = ("slider", "six_dof", "six_dof_near")
CACHE = Path(os.environ.get("FOCUS_ROS_CACHE", "/tmp/focus_ros_depth_cache"))


def simulate(name: str, duration_s: float = 3.0, seed: int = 0) -> Recording:
    """The recording of one of :data:`SEQUENCES` (simulated now; six_dof_near with seed + 1, so
    that its motion and texture are not the six_dof preset's), of a sequence of the wide depth
    set (focus_ros.sources.depth_set, e.g. "rotation_a": its own seed unless ``seed`` is given
    non-zero) or of any simulator preset (DAVIS240C)."""
    from dataclasses import replace

    from focus_ros.sources import depth_set
    from focus_ros.sources.presets import PRESETS
    from focus_ros.sources.simulator import simulate_preset

    wide = {sequence.name: sequence for sequence in depth_set.DEPTH_SET}
    if name in wide:
        sequence = replace(wide[name], duration_s=duration_s, seed=seed or wide[name].seed)
        return depth_set.simulate(sequence)
    if name not in SEQUENCES and name not in PRESETS:
        raise ValueError(f"unknown sequence {name!r}; choose one of {', '.join(SEQUENCES)}, a simulator preset "
                         f"({', '.join(PRESETS)}) or a sequence of the depth set ({', '.join(wide)})")
    return simulate_preset(name, duration_s, seed=seed + 1 if name == "six_dof_near" else seed)


def load(name: str, duration_s: float = 3.0, seed: int = 0) -> Recording:
    """The recording of a sequence, from the cache when it is there (simulated and cached if not)."""
    path = CACHE / f"{name}_{duration_s:g}s_seed{seed}.npz"
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        save_npz(simulate(name, duration_s, seed), path)
    recording = load_npz(path)
    if recording.calibration is None:  # cached before the calibration was kept: all are DAVIS240C
        recording.calibration = Calibration.davis240c()
    return recording

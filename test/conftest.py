"""Shared fixtures: the real event slices in ../shared/data (skipped where absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FOCUS_ROS_SHARED_DATA",
                                  REPOSITORY_ROOT.parent / "shared" / "data"))
EC_SLICES = SHARED_DATA / "ec_slices"
SLICE_NAMES = ["boxes_rotation", "poster_rotation", "shapes_rotation",
               "boxes_translation", "poster_translation"]


def slice_folder(name: str) -> Path:
    """The folder of one real ECD slice, or skip the test with the reason."""
    folder = EC_SLICES / name
    if not (folder / "events.txt").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"real event data missing in CI: {folder} (../shared must sit beside the clone)")
        pytest.skip(f"real event data not found at {folder} (needs ../shared/data beside the clone)")
    return folder


def slice_events(name: str):
    """The events (focus_ros.events.Events) of one real ECD slice, or skip as slice_folder does."""
    from focus_ros.sources.ecd import read_ecd_folder

    return read_ecd_folder(slice_folder(name)).events


@pytest.fixture
def boxes_rotation_folder() -> Path:
    return slice_folder("boxes_rotation")


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """Whatever a test does or fails at, the nodes it started (test/ros_harness.py) are stopped
    after it (those of wider-scoped fixtures at the end of the run)."""
    from ros_harness import running_processes, stop_all_processes

    before = running_processes()
    yield
    stop_all_processes(keep=before)

"""Shared fixtures: the data in ../shared/data (the real event slices, the peer bags): skipped
where absent, failed where absent in CI (see missing_shared)."""

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
#: the published contrast-maximisation estimate over the whole boxes_rotation slice (30,000 events,
#: reference time its first event; ../shared/data/ec_slices/README.md), rad/s, camera frame; a loose
#: reference: an estimate of the slice as one window lies within about 0.5 rad/s of it
BOXES_ROTATION_REFERENCE = (3.576, 3.945, -1.754)
#: the Event Camera Dataset's windows of 30,000 events, as node arguments: config/davis240c.yaml leaves the
#: node's auto windows, and the tests that count windows, or compare a slice (one such window) with its
#: reference, give these
DATASET_WINDOWS = ("-p", "window_events:=30000")


def missing_shared(path: Path, what: str):
    """End a test that needs ``path`` in ../shared/data, which is not there: a skip with the
    reason in a user's clone, a failure in CI (environment variable ``CI`` set), where the
    data always sits beside the clone and its absence is a broken setup, not a reason to skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} missing in CI: {path} (../shared must sit beside the clone)")
    pytest.skip(f"{what} not found at {path} (needs ../shared/data beside the clone)")


def shared_path(relative: str | Path, what: str = "shared data") -> Path:
    """``SHARED_DATA / relative`` if it exists, else :func:`missing_shared` (skip, or fail in CI)."""
    path = SHARED_DATA / relative
    if not path.exists():
        missing_shared(path, what)
    return path


def peer_bag(relative: str | Path) -> Path:
    """A bag of ../shared/data/peer_bags (see its README), as :func:`shared_path`."""
    return shared_path(Path("peer_bags") / relative, "peer bag")


def slice_folder(name: str) -> Path:
    """The folder of one real ECD slice, as :func:`shared_path` (skip, or fail in CI)."""
    folder = EC_SLICES / name
    if not (folder / "events.txt").is_file():
        missing_shared(folder, "real event data")
    return folder


def slice_events(name: str):
    """The events (focus_ros.events.Events) of one real ECD slice, or skip as slice_folder does."""
    from focus_ros.sources.ecd import read_ecd_folder

    return read_ecd_folder(slice_folder(name)).events


@pytest.fixture(scope="module")
def calibration():
    """A DAVIS240C's calibration: the camera of the depth tests' synthetic scenes."""
    from focus_ros.camera import Calibration

    return Calibration.davis240c()


@pytest.fixture(scope="module")
def sliding_plane(calibration):
    """The depth tests' scene: 250,000 events of a textured plane 1 m in front of the camera,
    which slides past it at 0.25 m/s for 1 s (``plane_events``' poses and depths)."""
    from focus_ros.depth.synthetic import plane_events

    return plane_events(calibration, depth_m=1.0, event_count=250_000, duration_s=1.0, speed_m_s=0.25)


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


def flattened_parameters(tree: dict, prefix: str = "") -> dict:
    """A params file's ``ros__parameters`` block as ROS names its parameters (nested keys joined
    with dots: ``{'calibration': {'fx': 200.0}}`` -> ``{'calibration.fx': 200.0}``)."""
    result = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            result.update(flattened_parameters(value, f"{prefix}{key}."))
        else:
            result[f"{prefix}{key}"] = value
    return result

"""Loss landscapes: the focus score of one window along 1-D slices through a centre ω and over a
2-D grid, normalised to [0, 1] (the paper's loss-landscape figures, Fig. 3 and Supp. Fig. 8-10).

The focus score is ``loss.sign * loss(IWE(ω))``: higher is sharper for every loss, so each
landscape's maximum should sit at the true ω.
"""

from __future__ import annotations

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events

PLANES = {"xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}


def window_objective(calibration: Calibration, loss_name: str, use_polarity: bool, window: Events, t_ref: str = "middle"):
    """The estimator's objective for one window (its events set, t_ref as the estimator uses it)
    and the loss sign: returns (objective, sign)."""
    from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, AngularVelocitySettings,
                                                        reference_time_ns)

    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=loss_name, use_polarity=use_polarity, t_ref=t_ref))
    if estimator.degenerate_reason:
        raise ValueError(estimator.degenerate_reason)
    objective = estimator.objective
    objective.set_events(window, reference_time_ns(window, t_ref), int(window.t[0]))
    return objective, estimator.loss.sign


def normalize(scores) -> np.ndarray:
    """Scores mapped linearly to [0, 1] (min -> 0, max -> 1); all zeros when constant."""
    scores = np.asarray(scores, dtype=np.float64)
    low, high = np.nanmin(scores), np.nanmax(scores)
    if not high > low:
        return np.zeros_like(scores)
    return (scores - low) / (high - low)


def slice_scores(objective, sign: float, center_rad_s, offsets_rad_s) -> np.ndarray:
    """Focus scores (3, S): row a varies ω_a by offsets (rad/s) around center, the others fixed."""
    center = np.asarray(center_rad_s, dtype=np.float64).reshape(3)
    offsets = np.asarray(offsets_rad_s, dtype=np.float64)
    scores = np.empty((3, len(offsets)))
    for axis in range(3):
        for index, offset in enumerate(offsets):
            omega = center.copy()
            omega[axis] += offset
            scores[axis, index] = sign * objective.value(omega)
    return scores


def grid_scores(objective, sign: float, center_rad_s, plane: str, offsets_a_rad_s, offsets_b_rad_s) -> np.ndarray:
    """Focus scores (B, A) over center + (offset_a on the plane's first axis, offset_b on its second)."""
    if plane not in PLANES:
        raise ValueError(f"unknown plane '{plane}': choose one of {', '.join(PLANES)}")
    first, second = PLANES[plane]
    center = np.asarray(center_rad_s, dtype=np.float64).reshape(3)
    scores = np.empty((len(offsets_b_rad_s), len(offsets_a_rad_s)))
    for row, offset_b in enumerate(offsets_b_rad_s):
        for column, offset_a in enumerate(offsets_a_rad_s):
            omega = center.copy()
            omega[first] += offset_a
            omega[second] += offset_b
            scores[row, column] = sign * objective.value(omega)
    return scores


def argmax_offsets(offsets, scores) -> np.ndarray:
    """For slice scores (P, S): the offset of each row's maximum (same unit as offsets)."""
    return np.asarray(offsets)[np.argmax(np.asarray(scores), axis=1)]

"""Optical-flow ground truth and errors (patch flow, ``focus_ros.estimators.optical_flow``).

Ground truth for a camera rotating at ω (rad/s, camera frame x right, y down, z forward) in a
static scene, in pixels of the raw (distorted) image, as the events are seen:

- a pixel's undistorted bearing b = (b_x, b_y, 1) (the calibration's look-up table) moves as
  db/dt = b × ω (the warp convention of ``focus_ros.warps``: b(t_ref) = exp([ω]× (t − t_ref)) b(t));
- its normalised image point n = (b_x, b_y) as dn/dt = (Ḃ_x − b_x Ḃ_z, Ḃ_y − b_y Ḃ_z);
- the raw pixel as du/dt = diag(f_x, f_y) · J_d(n) · dn/dt, with J_d the 2×2 Jacobian of the
  calibration's radial-tangential distortion (central differences of ``Calibration.distort``).

All three are linear in ω: ``rotation_flow_basis`` gives, per pixel, the 2×3 matrix M with
du/dt = M ω (px/s per rad/s). A patch's ground truth is the mean of M ω over the patch's events
(the estimator fits one v to exactly these events), with ω at the window's reference time.

Errors per valid patch (``FlowErrors``): the endpoint error |v − v_gt| in px/s and in px over the
window's time span T (|v − v_gt| · T), the share of patches whose endpoint error exceeds 3 px
over the window, and the share of patches (with enough events) that the estimator reported valid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.camera import Calibration

#: an endpoint error over this many px (over the window) counts as an outlier (MVSEC convention)
OUTLIER_PX = 3.0

_BASIS_CACHE: dict = {}


def rotation_flow_basis(calibration: Calibration) -> np.ndarray:
    """(height, width, 2, 3) matrix M per raw pixel: its image velocity du/dt = M ω (px/s) for a
    camera rotating at ω rad/s (module docstring). Cached per calibration."""
    cached = _BASIS_CACHE.get(calibration)
    if cached is not None:
        return cached
    bearings = calibration.bearing_lut()  # (H, W, 2)
    bx, by = bearings[..., 0], bearings[..., 1]
    zeros, ones = np.zeros_like(bx), np.ones_like(bx)
    # d bearing / dt = b x omega = [b]x omega, with b = (bx, by, 1)
    skew = np.stack([np.stack([zeros, -ones, by], -1),
                     np.stack([ones, zeros, -bx], -1),
                     np.stack([-by, bx, zeros], -1)], -2)  # (H, W, 3, 3)
    projection = np.stack([np.stack([ones, zeros, -bx], -1), np.stack([zeros, ones, -by], -1)], -2)  # (H, W, 2, 3)
    normalized_rate = projection @ skew  # (H, W, 2, 3): dn/dt per omega
    step = 1e-6
    jacobian = np.empty(bearings.shape[:2] + (2, 2))
    for axis in range(2):
        offset = np.zeros(2)
        offset[axis] = step
        jacobian[..., :, axis] = (calibration.distort(bearings + offset) - calibration.distort(bearings - offset)) / (2 * step)
    focal = np.array([calibration.fx, calibration.fy])
    basis = focal[:, None] * (jacobian @ normalized_rate)
    basis.setflags(write=False)
    _BASIS_CACHE[calibration] = basis
    return basis


def pixel_flow_from_rotation(calibration: Calibration, omega_rad_s, x, y) -> np.ndarray:
    """Image velocity (N, 2) px/s of raw pixels (x, y) for angular velocity ω (3,) rad/s."""
    basis = rotation_flow_basis(calibration)
    return basis[np.asarray(y, dtype=np.int64), np.asarray(x, dtype=np.int64)] @ np.asarray(omega_rad_s, dtype=np.float64)


def patch_flow_from_rotation(calibration: Calibration, grid, events, omega_rad_s) -> np.ndarray:
    """Ground-truth flow (P, 2) px/s of every patch of ``grid`` (focus_ros.patches.PatchGrid):
    the mean image velocity of its events for ω rad/s; NaN for patches without events."""
    event_index, patch = grid.memberships(events.x, events.y, margin=0)
    velocity = pixel_flow_from_rotation(calibration, omega_rad_s, events.x[event_index], events.y[event_index])
    counts = np.bincount(patch, minlength=grid.count).astype(np.float64)
    result = np.full((grid.count, 2), np.nan)
    has = counts > 0
    for axis in range(2):
        sums = np.bincount(patch, weights=velocity[:, axis], minlength=grid.count)
        result[has, axis] = sums[has] / counts[has]
    return result


@dataclass
class FlowErrors:
    """Endpoint errors of the valid patches of several windows, and the counts behind the shares.

    endpoint_px_s: (K,) |v − v_gt| px/s; endpoint_px: (K,) the same times each window's span (px);
    valid: patches reported valid with ground truth; candidates: patches with enough events
    and ground truth (the denominator of the valid share).
    """

    endpoint_px_s: np.ndarray
    endpoint_px: np.ndarray
    valid: int
    candidates: int

    @property
    def average_endpoint_px_s(self) -> float:
        return float(np.mean(self.endpoint_px_s)) if self.valid else float("nan")

    @property
    def average_endpoint_px(self) -> float:
        return float(np.mean(self.endpoint_px)) if self.valid else float("nan")

    @property
    def outlier_share(self) -> float:
        """Share of valid patches with an endpoint error over OUTLIER_PX px over the window."""
        return float(np.mean(self.endpoint_px > OUTLIER_PX)) if self.valid else float("nan")

    @property
    def valid_share(self) -> float:
        return self.valid / self.candidates if self.candidates else float("nan")


def window_errors(estimate, truth_px_s: np.ndarray, min_events: int) -> FlowErrors:
    """Errors of one ``FlowEstimate`` against ground truth (P, 2) px/s (NaN: none)."""
    has_truth = np.all(np.isfinite(truth_px_s), axis=1)
    candidates = has_truth & (estimate.event_counts >= min_events)
    valid = candidates & estimate.valid
    error = np.linalg.norm(estimate.flow[valid] - truth_px_s[valid], axis=1)
    return FlowErrors(error, error * estimate.duration_s, int(valid.sum()), int(candidates.sum()))


def combine(errors: list[FlowErrors]) -> FlowErrors:
    """All windows' errors together."""
    if not errors:
        return FlowErrors(np.empty(0), np.empty(0), 0, 0)
    return FlowErrors(np.concatenate([e.endpoint_px_s for e in errors]),
                      np.concatenate([e.endpoint_px for e in errors]),
                      sum(e.valid for e in errors), sum(e.candidates for e in errors))

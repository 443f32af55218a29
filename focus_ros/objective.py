"""The contrast-maximisation objective: warp -> IWE -> focus loss, value and d/dtheta.

For a window of events and parameters theta (angular velocity rad/s, or flow px/s):

1. forward: warp every event, paper eq. (2) (``focus_ros.warps.warp_points``, a
   vectorised pass writing the warped points x'_k), then vote them into the IWE, eq. (3)
   (``focus_ros.iwe`` window kernels; plus the timestamp image for the mean-timestamp loss);
2. the loss gives its value f(I) and the image G = df/dI (and G_T = df/dT);
3. adjoint: one gather pass over the events gives (d_x, d_y)_k =
   ``d/dx'_k sum_x (b_k G + tau_k G_T)(x) K(x - x'_k)``, and one vectorised pass contracts
   it with dx'_k/dtheta (``focus_ros.warps.warp_gradient``, no stored Jacobians):
   ``df/dtheta = sum_k (d_x, d_y)_k . dx'_k/dtheta``, the paper's supplementary eq.
   (DerivIWE) contracted with G, for any loss, at the cost of about one more IWE.

IWE blur (``blur_sigma_px`` > 0): the voted planes are blurred by a separable Gaussian
(``focus_ros.iwe.blur_image``, zero padding) before the loss, I_blur = B I: the paper's
Gaussian Dirac approximation (Sec. 2, epsilon = 1 px) at the cost of two image filters per
evaluation. B is symmetric, so the chain rule df/dI = B (df/dI_blur) blurs the loss's
gradient images with the same filter before the adjoint pass.

Polarity split: losses that need a count image (their ``polarity_modes`` lack "with",
e.g. the image area, Eq. (8)) are evaluated "with polarity" as the paper's footnote on the
area (Supp. Sec. B) defines it: on the count image of the positive events and on that of
the negative events separately, adding the values (and the gradients, each event's
adjoint reading the gradient image of its own polarity). See ``splits_polarity``.

Every buffer is allocated in ``set_events``; an evaluation allocates only what the loss
itself returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import math

import numba
import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.iwe import (BILINEAR, KERNELS, VotingWorkArrays, WarpedEventImage, bilinear_cells, blur_image,
                           gather_bilinear_cells, gather_gaussian_points, gaussian_blur_kernel, gaussian_scratch_size,
                           vote_bilinear_cells, vote_gaussian_points)
from focus_ros.warps import (KERNEL_OPTIONS, PARAMETER_COUNT, WARP_MODELS, rotate_bearings_by_angular_acceleration,
                             warp_gradient, warp_points)


@numba.njit(**KERNEL_OPTIONS)
def prepare_events(x, y, t, polarity, t_ref_ns, t_start_ns, bearing_lut_x, bearing_lut_y, width, use_signs,
                   split, plane_size, bearing_x, bearing_y, dt, timestamps, weights, plane_offset):
    """Per-event inputs of the window kernels, in one pass: undistorted bearings from the
    flat look-up tables (index y * width + x), dt_k = t_k - t_ref and tau_k = t_k - t_start
    (s, from integer ns), vote weights b_k (p_k when ``use_signs``, else 1) and image-plane
    offsets (``plane_size`` for negative events when ``split``, else 0).
    Returns max_k |dt_k| (s)."""
    largest = 0.0
    for k in range(x.shape[0]):
        index = np.int64(y[k]) * width + np.int64(x[k])
        bearing_x[k] = bearing_lut_x[index]
        bearing_y[k] = bearing_lut_y[index]
        dt[k] = np.float64(t[k] - t_ref_ns) / NANOSECONDS_PER_SECOND
        timestamps[k] = np.float64(t[k] - t_start_ns) / NANOSECONDS_PER_SECOND
        largest = max(largest, abs(dt[k]))
        weights[k] = np.float64(polarity[k]) if use_signs else 1.0
        plane_offset[k] = plane_size if (split and polarity[k] < 0) else 0
    return largest


def splits_polarity(loss) -> bool:
    """True when the loss needs a count image (I >= 0: its ``polarity_modes`` lack "with")
    and is not the timestamp loss. With polarity, the objective evaluates such a loss on
    the count images of the positive and of the negative events and adds the results
    (paper, footnote of Supp. Sec. B: the area "is applied to images of positive and
    negative events separately, and the results are added")."""
    return "with" not in loss.polarity_modes and not getattr(loss, "uses_timestamps", False)


def supported_polarity_modes(loss) -> tuple:
    """Polarity modes ("with", "without") the objective evaluates ``loss`` in: the loss's
    own ``polarity_modes``, plus "with" for the losses split per polarity. (The mean
    timestamp loss stays counts-only: the paper defines no polarity version, Table 2 '-'.)"""
    if splits_polarity(loss):
        return ("with", "without")
    return tuple(loss.polarity_modes)


@dataclass
class Evaluation:
    """One evaluation of the loss at theta: value f (the loss's own sign), gradient
    df/dtheta (or None), events kept in the frame and dropped outside it."""

    value: float
    gradient: np.ndarray | None
    kept: int
    dropped: int


class Objective:
    """Loss of the IWE of one window of events as a function of the warp parameters.

    calibration: the camera (its bearing LUT undistorts events; the IWE uses its K and size);
    loss: an object with ``evaluate(image, options, timestamp_image) -> (value, G, G_T)``,
    ``uses_timestamps`` and ``polarity_modes`` (the focus_ros.losses contract);
    warp: "exact" | "small_angle" (theta = angular velocity, rad/s) | "flow" (px/s);
    kernel: "bilinear" | "gaussian" (standard deviation ``sigma`` px);
    use_polarity: b_k = p_k (True) or 1 (False); for a counts-only loss, True means the
    polarity split (module docstring). Losses using timestamps get the count image
    without polarity, whatever ``use_polarity`` says.
    blur_sigma_px: standard deviation (px) of the Gaussian blur of the IWE before the loss
    (module docstring); 0 = no blur.
    """

    def __init__(self, calibration: Calibration, loss, warp: str = "exact", kernel: str = "bilinear",
                 sigma: float = 1.0, use_polarity: bool = True, loss_options=None, blur_sigma_px: float = 0.0):
        if warp not in WARP_MODELS:
            raise ValueError(f"unknown warp '{warp}': choose one of {', '.join(WARP_MODELS)}")
        if kernel not in KERNELS:
            raise ValueError(f"unknown IWE kernel '{kernel}': choose one of {', '.join(KERNELS)}")
        if not sigma > 0:
            raise ValueError(f"Gaussian sigma must be positive (px), got {sigma}")
        if not (math.isfinite(blur_sigma_px) and blur_sigma_px >= 0):
            raise ValueError(f"IWE blur sigma must be >= 0 px (0 = no blur), got {blur_sigma_px}")
        self.calibration = calibration
        self.loss = loss
        self.loss_options = loss_options
        self.model = WARP_MODELS[warp]
        self.parameter_count = PARAMETER_COUNT[self.model]
        self.kernel = KERNELS[kernel]
        self.sigma = float(sigma)
        self.uses_timestamps = bool(getattr(loss, "uses_timestamps", False))
        self.use_polarity = bool(use_polarity) and not self.uses_timestamps
        #: True: one count image per polarity, loss evaluated on each and summed
        self.split_polarity = self.use_polarity and splits_polarity(loss)
        self.bearing_lut = calibration.bearing_lut()
        self._bearing_lut_x = np.ascontiguousarray(self.bearing_lut[:, :, 0]).reshape(-1)
        self._bearing_lut_y = np.ascontiguousarray(self.bearing_lut[:, :, 1]).reshape(-1)
        self.width = calibration.width
        self.height = calibration.height
        planes = 2 if self.split_polarity else 1
        self.blur_sigma_px = float(blur_sigma_px)
        self._blur_kernel = gaussian_blur_kernel(self.blur_sigma_px) if self.blur_sigma_px > 0 else None
        #: the voted planes (warped events only); the loss sees ``_images`` (= votes, or blurred votes)
        self._votes = np.zeros((planes, self.height, self.width))
        self._timestamp_votes = np.zeros_like(self._votes) if self.uses_timestamps else None
        if self._blur_kernel is None:
            self._images, self._timestamp_images = self._votes, self._timestamp_votes
        else:
            self._images = np.zeros_like(self._votes)
            self._timestamp_images = np.zeros_like(self._votes) if self.uses_timestamps else None
        self._cotangents = np.zeros_like(self._votes) if planes > 1 or self._blur_kernel is not None else None
        self._timestamp_cotangent = (np.zeros((self.height, self.width))
                                     if self.uses_timestamps and self._blur_kernel is not None else None)
        self._scratch = np.empty((4, gaussian_scratch_size(self.sigma)))
        self._theta = np.zeros(3)
        self._gradient = np.zeros(3)
        self._allocate(0)
        self.set_events(Events.empty(), 0)

    # ---------------------------------------------------------------- events

    def set_events(self, events: Events, t_ref_ns: int, t_start_ns: int | None = None) -> None:
        """Use this window of events; dt_k = t_k - t_ref (s), tau_k = t_k - t_start (s)
        (t_start defaults to the first event). Raises ValueError naming the first event
        outside the sensor."""
        count = len(events)
        if count:
            outside = (events.x >= self.width) | (events.y >= self.height)
            if outside.any():
                index = int(np.argmax(outside))
                raise ValueError(
                    f"event {index} at pixel ({events.x[index]}, {events.y[index]}) lies outside the "
                    f"{self.width}x{self.height} sensor of the calibration")
        if t_start_ns is None:
            t_start_ns = int(events.t[0]) if count else 0
        if count != self.event_count:  # windows of a fixed size reuse their buffers
            self._allocate(count)
        self.dt_bound = prepare_events(
            events.x, events.y, events.t, events.p, np.int64(t_ref_ns), np.int64(t_start_ns),
            self._bearing_lut_x, self._bearing_lut_y, self.width, self.use_polarity and not self.split_polarity,
            self.split_polarity, self.height * self.width, self.bearing_x, self.bearing_y, self.dt,
            self.timestamps, self.weights, self.plane_offset)

    def compensate_angular_acceleration(self, angular_acceleration_rad_s2, angular_velocity_rad_s) -> None:
        """Make the rotational warp at omega model omega(t) = omega + alpha (t - t_ref) for this
        window, alpha (3,) rad/s^2, for omega near ``angular_velocity_rad_s`` (3,): each event's
        bearing is turned once (:func:`~focus_ros.warps.rotate_bearings_by_angular_acceleration`).
        Lasts until the next ``set_events``."""
        if PARAMETER_COUNT[self.model] != 3:
            raise ValueError("angular acceleration applies to the rotational warps, not to the flow warp")
        alpha = np.asarray(angular_acceleration_rad_s2, dtype=np.float64).reshape(3)
        omega = np.asarray(angular_velocity_rad_s, dtype=np.float64).reshape(3)
        rotate_bearings_by_angular_acceleration(self.bearing_x, self.bearing_y, self.dt, *map(float, alpha),
                                                *map(float, omega))

    def _allocate(self, count: int) -> None:
        """Per-event inputs (filled by ``prepare_events``) and work arrays for N events."""
        self.event_count = count
        self.bearing_x = np.empty(count)
        self.bearing_y = np.empty(count)
        self.dt = np.empty(count)
        self.timestamps = np.empty(count)
        self.weights = np.empty(count)
        #: flat offset of each event's image plane: the negative events' plane when split
        self.plane_offset = np.empty(count, dtype=np.int64)
        self._work = VotingWorkArrays.allocate(count)

    # ---------------------------------------------------------------- evaluation

    def _forward(self, theta) -> int:
        """Warp and vote into the image planes at theta; returns the number of kept events."""
        theta = np.asarray(theta, dtype=np.float64).ravel()
        if theta.size != self.parameter_count:
            raise ValueError(f"expected {self.parameter_count} warp parameters, got {theta.size}")
        self._theta[:self.parameter_count] = theta
        calibration = self.calibration
        work = self._work
        warp_points(self.model, self.bearing_x, self.bearing_y, self.dt, self._theta, calibration.fx,
                    calibration.fy, calibration.cx, calibration.cy, work.warped_x, work.warped_y, self.dt_bound)
        self._votes.fill(0.0)
        images = self._votes.reshape(-1)
        if self.uses_timestamps:
            self._timestamp_votes.fill(0.0)
        if self.kernel == BILINEAR:
            kept = bilinear_cells(work.warped_x, work.warped_y, self.width, self.height, work.cell,
                                  work.fraction_x, work.fraction_y, work.kept)
            vote_bilinear_cells(work.cell, work.fraction_x, work.fraction_y, work.kept, self.weights,
                                self.plane_offset, self.width, images)
            if self.uses_timestamps:
                vote_bilinear_cells(work.cell, work.fraction_x, work.fraction_y, work.kept, self.timestamps,
                                    self.plane_offset, self.width, self._timestamp_votes.reshape(-1))
        else:
            kept = vote_gaussian_points(work.warped_x, work.warped_y, self.weights, self.plane_offset,
                                        self.width, self.height, self.sigma, images, work.kept, self._scratch)
            if self.uses_timestamps:
                vote_gaussian_points(work.warped_x, work.warped_y, self.timestamps, self.plane_offset,
                                     self.width, self.height, self.sigma, self._timestamp_votes.reshape(-1),
                                     work.kept, self._scratch)
        if self._blur_kernel is not None:
            for plane in range(self._votes.shape[0]):
                blur_image(self._votes[plane], self._blur_kernel, self._images[plane])
            if self.uses_timestamps:
                blur_image(self._timestamp_votes[0], self._blur_kernel, self._timestamp_images[0])
        return int(kept)

    def _loss(self):
        """(value, df/dvotes flat, df/dtimestamp-votes flat or None) summed over the image
        planes: the loss's gradient images, blurred when the IWE is (chain rule, B = B^T)."""
        blur = self._blur_kernel
        if not self.split_polarity:
            value, grad_image, grad_timestamp_image = self.loss.evaluate(
                self._images[0], self.loss_options,
                self._timestamp_images[0] if self.uses_timestamps else None)
            grad_image = np.ascontiguousarray(grad_image, dtype=np.float64)
            if blur is not None:
                grad_image = blur_image(grad_image, blur, self._cotangents[0])
            if grad_timestamp_image is not None:
                grad_timestamp_image = np.ascontiguousarray(grad_timestamp_image, dtype=np.float64)
                if blur is not None:
                    grad_timestamp_image = blur_image(grad_timestamp_image, blur, self._timestamp_cotangent)
                grad_timestamp_image = grad_timestamp_image.reshape(-1)
            return value, grad_image.reshape(-1), grad_timestamp_image
        value = 0.0
        for plane in range(self._images.shape[0]):
            plane_value, grad_image, _ = self.loss.evaluate(self._images[plane], self.loss_options, None)
            value += plane_value
            if blur is not None:
                blur_image(np.ascontiguousarray(grad_image, dtype=np.float64), blur, self._cotangents[plane])
            else:
                self._cotangents[plane] = grad_image
        return value, self._cotangents.reshape(-1), None

    def evaluate_loss(self) -> float:
        """The loss alone (value and its image gradients) on the images of the last evaluation,
        as the objective computes it: summed over the polarity planes when split, without the
        blur of the gradient images. For timing the loss step; returns the value."""
        if not self.split_polarity:
            value, _, _ = self.loss.evaluate(self._images[0], self.loss_options,
                                             self._timestamp_images[0] if self.uses_timestamps else None)
            return value
        return sum(self.loss.evaluate(plane, self.loss_options, None)[0] for plane in self._images)

    def _gather(self, cotangent, weights, add: bool) -> None:
        """(d_x, d_y)_k (+)= weights_k * d/dx'_k sum_x cotangent(x) K(x - x'_k)."""
        work = self._work
        if self.kernel == BILINEAR:
            gather_bilinear_cells(work.cell, work.fraction_x, work.fraction_y, work.kept, weights,
                                  self.plane_offset, self.width, cotangent, work.d_x, work.d_y, add)
        else:
            gather_gaussian_points(work.warped_x, work.warped_y, work.kept, weights, self.plane_offset,
                                   self.width, self.height, self.sigma, cotangent, work.d_x, work.d_y, add,
                                   self._scratch)

    def evaluate(self, theta, with_gradient: bool = True) -> Evaluation:
        """Loss value at theta and, if asked, its gradient df/dtheta (adjoint route)."""
        kept = self._forward(theta)
        value, grad_image, grad_timestamp_image = self._loss()
        dropped = self.event_count - kept
        if not with_gradient:
            return Evaluation(float(value), None, kept, dropped)
        self._gather(grad_image, self.weights, add=False)
        if grad_timestamp_image is not None:
            self._gather(grad_timestamp_image, self.timestamps, add=True)
        calibration, work = self.calibration, self._work
        warp_gradient(self.model, self.bearing_x, self.bearing_y, self.dt, self._theta, calibration.fx,
                      calibration.fy, calibration.cx, calibration.cy, work.warped_x, work.warped_y,
                      work.d_x, work.d_y, work.kept, self._gradient, self.dt_bound)
        return Evaluation(float(value), self._gradient[:self.parameter_count].copy(), kept, dropped)

    def value(self, theta) -> float:
        """Loss value at theta (no gradient)."""
        return self.evaluate(theta, with_gradient=False).value

    def image(self, theta) -> WarpedEventImage:
        """The IWE (and timestamp image) at theta, as copies (blurred when ``blur_sigma_px`` > 0:
        the images the loss sees). With the polarity split,
        ``image`` is the positive minus the negative count image (the IWE with polarity)
        and ``polarity_images`` holds both."""
        kept = self._forward(theta)
        timestamp_image = self._timestamp_images[0].copy() if self.uses_timestamps else None
        if self.split_polarity:
            return WarpedEventImage(self._images[0] - self._images[1], timestamp_image, self._work.kept.copy(),
                                    self.event_count - kept, polarity_images=self._images.copy())
        return WarpedEventImage(self._images[0].copy(), timestamp_image, self._work.kept.copy(),
                                self.event_count - kept)

"""The contrast-maximisation objective: warp -> IWE -> focus loss, value and d/dtheta.

For a window of events and parameters theta (angular velocity rad/s, or flow px/s):

1. forward (one fused numba pass over the events): warp each event, paper eq. (2),
   with its Jacobian dx'_k/dtheta, and vote into the IWE, eq. (3) (plus the timestamp
   image for the mean-timestamp loss);
2. the loss gives its value f(I) and the image G = df/dI (and G_T = df/dT);
3. adjoint pass (one more pass over the events):
   ``df/dtheta = sum_k [d/dx'_k sum_x (b_k G + tau_k G_T)(x) K(x - x'_k)] . dx'_k/dtheta``,
   which is the paper's supplementary eq. (DerivIWE) contracted with G, for any loss,
   at the cost of about one more IWE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.iwe import (BILINEAR, GAUSSIAN, KERNELS, WarpedEventImage, adjoint_bilinear, adjoint_gaussian,
                           gaussian_scratch_size, inside_frame, vote_bilinear, vote_gaussian)
from focus_ros.warps import FASTMATH, PARAMETER_COUNT, WARP_MODELS, warp_one


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def _forward_body(model, kernel, with_jacobian, sigma, bearing_x, bearing_y, dt, weights, timestamps,
                  with_timestamps, theta, fx, fy, cx, cy, image, timestamp_image, points, jacobians,
                  kept, scratch):
    """Warp every event and vote it into ``image`` (and ``timestamp_image``), fused.

    Stores warped points (N, 2) px, Jacobians (N, 6) and the kept flags for the adjoint
    pass when ``with_jacobian``. Returns the number of kept (in-frame) events.
    ``kernel`` and ``with_jacobian`` are constants in each compiled entry point below,
    so that the compiler removes the unused branches from the loop.
    """
    height, width = image.shape
    t0 = theta[0]
    t1 = theta[1]
    t2 = theta[2]
    kept_count = 0
    for k in range(dt.shape[0]):
        x, y, j00, j01, j02, j10, j11, j12 = warp_one(
            model, bearing_x[k], bearing_y[k], dt[k], t0, t1, t2, fx, fy, cx, cy, with_jacobian)
        inside = inside_frame(x, y, width, height)
        if with_jacobian:
            kept[k] = inside
            points[k, 0] = x
            points[k, 1] = y
            jacobians[k, 0] = j00
            jacobians[k, 1] = j01
            jacobians[k, 2] = j02
            jacobians[k, 3] = j10
            jacobians[k, 4] = j11
            jacobians[k, 5] = j12
        if not inside:
            continue
        kept_count += 1
        if kernel == BILINEAR:
            vote_bilinear(image, x, y, weights[k])
            if with_timestamps:
                vote_bilinear(timestamp_image, x, y, timestamps[k])
        else:
            vote_gaussian(image, x, y, weights[k], sigma, scratch)
            if with_timestamps:
                vote_gaussian(timestamp_image, x, y, timestamps[k], sigma, scratch)
    return kept_count


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def forward_bilinear(model, sigma, bearing_x, bearing_y, dt, weights, timestamps, with_timestamps,
                     theta, fx, fy, cx, cy, image, timestamp_image, points, jacobians, kept, scratch):
    """Forward pass, bilinear voting, value only (see ``_forward_body``)."""
    return _forward_body(model, BILINEAR, False, sigma, bearing_x, bearing_y, dt, weights, timestamps,
                         with_timestamps, theta, fx, fy, cx, cy, image, timestamp_image, points,
                         jacobians, kept, scratch)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def forward_bilinear_jacobian(model, sigma, bearing_x, bearing_y, dt, weights, timestamps, with_timestamps,
                              theta, fx, fy, cx, cy, image, timestamp_image, points, jacobians, kept, scratch):
    """Forward pass, bilinear voting, storing points and Jacobians for the adjoint."""
    return _forward_body(model, BILINEAR, True, sigma, bearing_x, bearing_y, dt, weights, timestamps,
                         with_timestamps, theta, fx, fy, cx, cy, image, timestamp_image, points,
                         jacobians, kept, scratch)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def forward_gaussian(model, sigma, bearing_x, bearing_y, dt, weights, timestamps, with_timestamps,
                     theta, fx, fy, cx, cy, image, timestamp_image, points, jacobians, kept, scratch):
    """Forward pass, Gaussian kernel, value only."""
    return _forward_body(model, GAUSSIAN, False, sigma, bearing_x, bearing_y, dt, weights, timestamps,
                         with_timestamps, theta, fx, fy, cx, cy, image, timestamp_image, points,
                         jacobians, kept, scratch)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def forward_gaussian_jacobian(model, sigma, bearing_x, bearing_y, dt, weights, timestamps, with_timestamps,
                              theta, fx, fy, cx, cy, image, timestamp_image, points, jacobians, kept, scratch):
    """Forward pass, Gaussian kernel, storing points and Jacobians for the adjoint."""
    return _forward_body(model, GAUSSIAN, True, sigma, bearing_x, bearing_y, dt, weights, timestamps,
                         with_timestamps, theta, fx, fy, cx, cy, image, timestamp_image, points,
                         jacobians, kept, scratch)


#: (kernel code, with Jacobian) -> compiled forward pass
FORWARD_PASSES = {(BILINEAR, False): forward_bilinear, (BILINEAR, True): forward_bilinear_jacobian,
                  (GAUSSIAN, False): forward_gaussian, (GAUSSIAN, True): forward_gaussian_jacobian}


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def adjoint_pass(kernel, sigma, points, jacobians, kept, weights, timestamps, with_timestamps,
                 grad_image, grad_timestamp_image, scratch, gradient):
    """Accumulate df/dtheta (3,) from df/dI (and df/dT) over the kept events."""
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    for k in range(points.shape[0]):
        if not kept[k]:
            continue
        x = points[k, 0]
        y = points[k, 1]
        if kernel == BILINEAR:
            d_x, d_y = adjoint_bilinear(grad_image, x, y)
        else:
            d_x, d_y = adjoint_gaussian(grad_image, x, y, sigma, scratch)
        d_x *= weights[k]
        d_y *= weights[k]
        if with_timestamps:
            if kernel == BILINEAR:
                e_x, e_y = adjoint_bilinear(grad_timestamp_image, x, y)
            else:
                e_x, e_y = adjoint_gaussian(grad_timestamp_image, x, y, sigma, scratch)
            d_x += timestamps[k] * e_x
            d_y += timestamps[k] * e_y
        g0 += d_x * jacobians[k, 0] + d_y * jacobians[k, 3]
        g1 += d_x * jacobians[k, 1] + d_y * jacobians[k, 4]
        g2 += d_x * jacobians[k, 2] + d_y * jacobians[k, 5]
    gradient[0] = g0
    gradient[1] = g1
    gradient[2] = g2


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
    loss: an object with ``evaluate(image, options, timestamp_image) -> (value, G, G_T)`` and
    ``uses_timestamps`` (the focus_ros.losses contract);
    warp: "exact" | "small_angle" (theta = angular velocity, rad/s) | "flow" (px/s);
    kernel: "bilinear" | "gaussian" (standard deviation ``sigma`` px);
    use_polarity: b_k = p_k (True) or 1 (False). Losses using timestamps get the count
    image without polarity, whatever ``use_polarity`` says.
    """

    def __init__(self, calibration: Calibration, loss, warp: str = "exact", kernel: str = "bilinear",
                 sigma: float = 1.0, use_polarity: bool = True, loss_options=None):
        if warp not in WARP_MODELS:
            raise ValueError(f"unknown warp '{warp}': choose one of {', '.join(WARP_MODELS)}")
        if kernel not in KERNELS:
            raise ValueError(f"unknown IWE kernel '{kernel}': choose one of {', '.join(KERNELS)}")
        if not sigma > 0:
            raise ValueError(f"Gaussian sigma must be positive (px), got {sigma}")
        self.calibration = calibration
        self.loss = loss
        self.loss_options = loss_options
        self.model = WARP_MODELS[warp]
        self.parameter_count = PARAMETER_COUNT[self.model]
        self.kernel = KERNELS[kernel]
        self.sigma = float(sigma)
        self.uses_timestamps = bool(getattr(loss, "uses_timestamps", False))
        self.use_polarity = bool(use_polarity) and not self.uses_timestamps
        self.bearing_lut = calibration.bearing_lut()
        shape = (calibration.height, calibration.width)
        self._image = np.zeros(shape)
        self._timestamp_image = np.zeros(shape) if self.uses_timestamps else np.zeros((1, 1))
        self._scratch = np.empty((4, gaussian_scratch_size(self.sigma)))
        self._theta = np.zeros(3)
        self._gradient = np.zeros(3)
        self.set_events(Events.empty(), 0)

    # ---------------------------------------------------------------- events

    def set_events(self, events: Events, t_ref_ns: int, t_start_ns: int | None = None) -> None:
        """Use this window of events; dt_k = t_k - t_ref (s), tau_k = t_k - t_start (s)
        (t_start defaults to the first event). Raises ValueError naming the first event
        outside the sensor."""
        count = len(events)
        if count:
            outside = (events.x >= self.calibration.width) | (events.y >= self.calibration.height)
            if outside.any():
                index = int(np.argmax(outside))
                raise ValueError(
                    f"event {index} at pixel ({events.x[index]}, {events.y[index]}) lies outside the "
                    f"{self.calibration.width}x{self.calibration.height} sensor of the calibration")
        bearings = self.bearing_lut[events.y, events.x]
        self.bearing_x = np.ascontiguousarray(bearings[:, 0])
        self.bearing_y = np.ascontiguousarray(bearings[:, 1])
        self.dt = (events.t - np.int64(t_ref_ns)).astype(np.float64) / NANOSECONDS_PER_SECOND
        if t_start_ns is None:
            t_start_ns = int(events.t[0]) if count else 0
        self.timestamps = (events.t - np.int64(t_start_ns)).astype(np.float64) / NANOSECONDS_PER_SECOND
        self.weights = events.p.astype(np.float64) if self.use_polarity else np.ones(count)
        self.event_count = count
        self._points = np.empty((count, 2))
        self._jacobians = np.empty((count, 6))
        self._kept = np.empty(count, dtype=np.bool_)

    # ---------------------------------------------------------------- evaluation

    def _forward(self, theta, with_jacobian: bool) -> int:
        theta = np.asarray(theta, dtype=np.float64).ravel()
        if theta.size != self.parameter_count:
            raise ValueError(f"expected {self.parameter_count} warp parameters, got {theta.size}")
        self._theta[:self.parameter_count] = theta
        self._image.fill(0.0)
        if self.uses_timestamps:
            self._timestamp_image.fill(0.0)
        calibration = self.calibration
        forward = FORWARD_PASSES[(self.kernel, bool(with_jacobian))]
        return forward(self.model, self.sigma, self.bearing_x, self.bearing_y, self.dt, self.weights,
                       self.timestamps, self.uses_timestamps, self._theta, calibration.fx, calibration.fy,
                       calibration.cx, calibration.cy, self._image, self._timestamp_image, self._points,
                       self._jacobians, self._kept, self._scratch)

    def _loss(self):
        return self.loss.evaluate(self._image, self.loss_options,
                                  self._timestamp_image if self.uses_timestamps else None)

    def evaluate(self, theta, with_gradient: bool = True) -> Evaluation:
        """Loss value at theta and, if asked, its gradient df/dtheta (adjoint route)."""
        kept = self._forward(theta, with_gradient)
        value, grad_image, grad_timestamp_image = self._loss()
        dropped = self.event_count - int(kept)
        if not with_gradient:
            return Evaluation(float(value), None, int(kept), dropped)
        if grad_timestamp_image is None:
            grad_timestamp_image = np.zeros((1, 1))
        adjoint_pass(self.kernel, self.sigma, self._points, self._jacobians, self._kept, self.weights,
                     self.timestamps, self.uses_timestamps, np.ascontiguousarray(grad_image, dtype=np.float64),
                     np.ascontiguousarray(grad_timestamp_image, dtype=np.float64), self._scratch,
                     self._gradient)
        return Evaluation(float(value), self._gradient[:self.parameter_count].copy(), int(kept), dropped)

    def value(self, theta) -> float:
        """Loss value at theta (no gradient)."""
        return self.evaluate(theta, with_gradient=False).value

    def image(self, theta) -> WarpedEventImage:
        """The IWE (and timestamp image) at theta, as copies."""
        kept_count = self._forward(theta, True)
        return WarpedEventImage(self._image.copy(),
                                self._timestamp_image.copy() if self.uses_timestamps else None,
                                self._kept.copy(), self.event_count - int(kept_count))

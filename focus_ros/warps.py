"""Warps: transport each event to the reference time t_ref along a point trajectory.

Paper eq. (2): ``e_k = (x_k, t_k, p_k) -> e'_k = (x'_k, t_ref, p_k)`` with
``x'_k = W(x_k, t_k; theta)``. Every warp here also returns its Jacobian
``dx'_k / dtheta`` (px per unit of theta), needed by the adjoint gradient.

Inputs per event are the undistorted bearing (x/z, y/z) from the calibration's
``bearing_lut`` and ``dt_k = t_k - t_ref`` in seconds. Outputs are pixels (px) of the
undistorted image plane (pinhole with the calibration's K, no distortion).

Warp models (theta):

- ``ROTATION_EXACT`` (theta = angular velocity omega, rad/s, 3 parameters):
  ``bearing_ref = exp([omega]x dt_k) * bearing_k`` (exact exponential map), then project.
- ``ROTATION_SMALL_ANGLE`` (omega, rad/s): ``bearing_ref = bearing_k + dt_k * omega x bearing_k``.
- ``FLOW`` (theta = optical flow v, px/s, 2 parameters): ``x' = x - dt_k * v`` in the
  undistorted image plane.

Two layers:

- per-event functions (``warp_one`` and the models' functions) returning the warped point
  and its 2x3 Jacobian; ``warp_events`` is their array version, used by tests and tools;
- the engine's window kernels (``warp_points``, ``warp_gradient``), used by
  ``focus_ros.objective``: structure-of-arrays in and out (contiguous float64
  bearing_x, bearing_y, dt), branch-free loops that the compiler vectorises
  (``error_model="numpy"``: no per-division zero check), and no stored Jacobians: the
  gradient pass contracts the IWE's adjoint (d_x, d_y) = dL/dx'_k with dx'_k/dtheta in
  closed form (see ``_rotation_exact_gradient_series``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

ROTATION_EXACT = 0
ROTATION_SMALL_ANGLE = 1
FLOW = 2

#: warp name (as used in settings and the command line) -> model code
WARP_MODELS = {"exact": ROTATION_EXACT, "small_angle": ROTATION_SMALL_ANGLE, "flow": FLOW}

#: number of parameters of each model code
PARAMETER_COUNT = {ROTATION_EXACT: 3, ROTATION_SMALL_ANGLE: 3, FLOW: 2}

#: LLVM fast-math flags for the hot loops: reassociation and contraction, but NaN and
#: infinity stay meaningful (an event behind the camera must not pass range checks)
FASTMATH = {"contract", "arcp", "reassoc", "nsz"}

#: compile options of the window kernels: vectorisable loops (no Python-style zero-division
#: check) with the fast-math flags above
KERNEL_OPTIONS = dict(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")

#: below this rotation angle (rad) the Rodrigues coefficients use their Taylor series
_SERIES_ANGLE = 0.5

def _series_coefficient(power: int, factorial_offset: int) -> float:
    """(-1)^n / (2n + offset)! for the Rodrigues series."""
    return (-1.0) ** power / math.factorial(2 * power + factorial_offset)


_A1, _A2, _A3, _A4, _A5, _A6 = (_series_coefficient(n, 1) for n in range(1, 7))
_B0, _B1, _B2, _B3, _B4, _B5, _B6 = (_series_coefficient(n, 2) for n in range(7))
_C0, _C1, _C2, _C3, _C4, _C5, _C6 = (_series_coefficient(n, 3) for n in range(7))


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def rodrigues_coefficients(angle_squared: float):
    """Coefficients of the SO(3) exponential for an angle a (rad), given a^2:

    ``A = sin(a)/a``, ``B = (1 - cos a)/a^2``, ``C = (a - sin a)/a^3``, so that
    ``exp([phi]x) = I + A [phi]x + B [phi]x^2`` and the left Jacobian
    ``J_l(phi) = I + B [phi]x + C [phi]x^2``.
    For a < 0.5 rad a Taylor series in a^2 is used (truncation error < 1e-15,
    no cancellation), otherwise the trigonometric form.
    """
    s = angle_squared
    if s < _SERIES_ANGLE * _SERIES_ANGLE:
        # Horner forms of sum_n (-1)^n s^n / (2n+1)!, /(2n+2)!, /(2n+3)!, n = 0..6
        a = 1.0 + s * (_A1 + s * (_A2 + s * (_A3 + s * (_A4 + s * (_A5 + s * _A6)))))
        b = _B0 + s * (_B1 + s * (_B2 + s * (_B3 + s * (_B4 + s * (_B5 + s * _B6)))))
        c = _C0 + s * (_C1 + s * (_C2 + s * (_C3 + s * (_C4 + s * (_C5 + s * _C6)))))
        return a, b, c
    angle = math.sqrt(s)
    sine = math.sin(angle)
    a = sine / angle
    b = (1.0 - math.cos(angle)) / s
    c = (angle - sine) / (s * angle)
    return a, b, c


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def _projection_rows(fx, fy, X, Y, Z):
    """Rows of d(pixel)/d(point) for the pinhole: (fx/Z, 0, -fx X/Z^2), (0, fy/Z, -fy Y/Z^2)."""
    inverse_z = 1.0 / Z
    return (fx * inverse_z, 0.0, -fx * X * inverse_z * inverse_z,
            0.0, fy * inverse_z, -fy * Y * inverse_z * inverse_z)


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def warp_rotation_exact(bearing_x, bearing_y, dt, wx, wy, wz, fx, fy, cx, cy, with_jacobian):
    """Exact rotational warp of one event (see module docstring).

    bearing_x, bearing_y: undistorted normalized coordinates; dt = t_k - t_ref (s);
    (wx, wy, wz): angular velocity (rad/s); fx, fy, cx, cy: pinhole (px).
    Returns (x', y', j00, j01, j02, j10, j11, j12) with j = dx'/domega (px per rad/s);
    Jacobian entries are zero when ``with_jacobian`` is False.

    With phi = omega dt, s = |phi|^2 and [phi]x^2 = phi phi^T - s I:
    r = exp([phi]x) b = (1 - B s) b + A phi x b + B (phi . b) phi.
    Jacobian: d r/d omega = -[r]x J_l(phi) dt with J_l = (1 - C s) I + B [phi]x + C phi phi^T;
    the rows of d x'/d r (pinhole) times -[r]x are u0 = fx (-x y, 1 + x^2, -y) and
    u1 = fy (-(1 + y^2), x y, x) at the projected point (x, y) = (X/Z, Y/Z); a row u
    times J_l is (1 - C s) u + B u x phi + C (u . phi) phi.
    """
    px = wx * dt
    py = wy * dt
    pz = wz * dt
    s = px * px + py * py + pz * pz
    a, b, c = rodrigues_coefficients(s)
    ux, uy, uz = _cross(px, py, pz, bearing_x, bearing_y, 1.0)
    along = b * (px * bearing_x + py * bearing_y + pz)
    scale = 1.0 - b * s
    X = scale * bearing_x + a * ux + along * px
    Y = scale * bearing_y + a * uy + along * py
    Z = scale + a * uz + along * pz
    inverse_z = 1.0 / Z
    x = X * inverse_z
    y = Y * inverse_z
    x_warped = fx * x + cx
    y_warped = fy * y + cy
    if not with_jacobian:
        return x_warped, y_warped, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    xy = x * y
    identity_part = (1.0 - c * s) * dt
    b_dt = b * dt
    c_dt = c * dt
    # row 0: u0 = fx (-xy, 1 + x^2, -y)
    u0x = -fx * xy
    u0y = fx * (1.0 + x * x)
    u0z = -fx * y
    v0x, v0y, v0z = _cross(u0x, u0y, u0z, px, py, pz)
    d0 = c_dt * (u0x * px + u0y * py + u0z * pz)
    # row 1: u1 = fy (-(1 + y^2), xy, x)
    u1x = -fy * (1.0 + y * y)
    u1y = fy * xy
    u1z = fy * x
    v1x, v1y, v1z = _cross(u1x, u1y, u1z, px, py, pz)
    d1 = c_dt * (u1x * px + u1y * py + u1z * pz)
    return (x_warped, y_warped,
            identity_part * u0x + b_dt * v0x + d0 * px,
            identity_part * u0y + b_dt * v0y + d0 * py,
            identity_part * u0z + b_dt * v0z + d0 * pz,
            identity_part * u1x + b_dt * v1x + d1 * px,
            identity_part * u1y + b_dt * v1y + d1 * py,
            identity_part * u1z + b_dt * v1z + d1 * pz)


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def warp_rotation_small_angle(bearing_x, bearing_y, dt, wx, wy, wz, fx, fy, cx, cy, with_jacobian):
    """First-order rotational warp of one event: r = b + dt omega x b, then project.

    Same arguments and return layout as ``warp_rotation_exact``;
    Jacobian d r / d omega = -[b]x dt.
    """
    ux, uy, uz = _cross(wx, wy, wz, bearing_x, bearing_y, 1.0)
    X = bearing_x + dt * ux
    Y = bearing_y + dt * uy
    Z = 1.0 + dt * uz
    inverse_z = 1.0 / Z
    x_warped = fx * X * inverse_z + cx
    y_warped = fy * Y * inverse_z + cy
    if not with_jacobian:
        return x_warped, y_warped, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    p00, p01, p02, p10, p11, p12 = _projection_rows(fx, fy, X, Y, Z)
    r0x, r0y, r0z = _cross(bearing_x, bearing_y, 1.0, p00, p01, p02)
    r1x, r1y, r1z = _cross(bearing_x, bearing_y, 1.0, p10, p11, p12)
    return (x_warped, y_warped, r0x * dt, r0y * dt, r0z * dt, r1x * dt, r1y * dt, r1z * dt)


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def warp_flow(bearing_x, bearing_y, dt, vx, vy, unused, fx, fy, cx, cy, with_jacobian):
    """Patch optical-flow warp of one event: x' = x - dt v (v in px/s), in the undistorted
    image plane. Jacobian dx'/dv = -dt I (third column zero)."""
    x_warped = fx * bearing_x + cx - dt * vx
    y_warped = fy * bearing_y + cy - dt * vy
    return x_warped, y_warped, -dt, 0.0, 0.0, 0.0, -dt, 0.0


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def warp_one(model, bearing_x, bearing_y, dt, t0, t1, t2, fx, fy, cx, cy, with_jacobian):
    """Dispatch one event to the warp ``model`` (ROTATION_EXACT, ROTATION_SMALL_ANGLE, FLOW)."""
    if model == ROTATION_EXACT:
        return warp_rotation_exact(bearing_x, bearing_y, dt, t0, t1, t2, fx, fy, cx, cy, with_jacobian)
    if model == ROTATION_SMALL_ANGLE:
        return warp_rotation_small_angle(bearing_x, bearing_y, dt, t0, t1, t2, fx, fy, cx, cy, with_jacobian)
    return warp_flow(bearing_x, bearing_y, dt, t0, t1, t2, fx, fy, cx, cy, with_jacobian)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _warp_events_kernel(model, bearing_x, bearing_y, dt, theta, fx, fy, cx, cy, points, jacobians):
    for k in range(len(dt)):
        x_w, y_w, j00, j01, j02, j10, j11, j12 = warp_one(
            model, bearing_x[k], bearing_y[k], dt[k], theta[0], theta[1], theta[2], fx, fy, cx, cy, True)
        points[k, 0] = x_w
        points[k, 1] = y_w
        jacobians[k, 0, 0] = j00
        jacobians[k, 0, 1] = j01
        jacobians[k, 0, 2] = j02
        jacobians[k, 1, 0] = j10
        jacobians[k, 1, 1] = j11
        jacobians[k, 1, 2] = j12


def warp_events(model: int, bearings: np.ndarray, dt: np.ndarray, theta, fx: float, fy: float,
                cx: float, cy: float) -> tuple[np.ndarray, np.ndarray]:
    """Warp N events: bearings (N, 2) undistorted normalized coordinates, dt (N,) seconds
    (t_k - t_ref), theta (3,) rad/s or (2,) px/s for FLOW.

    Returns (points (N, 2) px, jacobians (N, 2, P) with P = PARAMETER_COUNT[model]).
    """
    count = PARAMETER_COUNT[model]
    theta = np.asarray(theta, dtype=np.float64).ravel()
    if theta.size != count:
        raise ValueError(f"warp model {model} takes {count} parameters, got {theta.size}")
    padded = np.zeros(3)
    padded[:count] = theta
    bearings = np.ascontiguousarray(bearings, dtype=np.float64)
    dt = np.ascontiguousarray(dt, dtype=np.float64)
    points = np.empty((len(dt), 2))
    jacobians = np.empty((len(dt), 2, 3))
    _warp_events_kernel(model, bearings[:, 0].copy(), bearings[:, 1].copy(), dt, padded,
                        float(fx), float(fy), float(cx), float(cy), points, jacobians)
    return points, jacobians[:, :, :count]


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def rotate_bearings_by_angular_acceleration(bearing_x, bearing_y, dt, ax, ay, az, wx, wy, wz):
    """Turn each event's bearing (x/z, y/z) in place so that the rotational warp at omega
    then follows omega(t) = omega + alpha (t - t_ref): alpha = (ax, ay, az) a constant angular
    acceleration (rad/s^2), (wx, wy, wz) rad/s the angular velocity the warp will be evaluated
    near, dt_k = t_k - t_ref (s).

    The exact rotation from t_k to t_ref has the rotation vector (Magnus expansion)
    omega dt + alpha dt^2 / 2 + (omega x alpha) dt^3 / 12 + O(dt^4); the warp composes
    exp([omega dt]x) exp([phi_k]x) = exp([omega dt + phi_k + (omega dt) x phi_k / 2 + ...]x),
    so phi_k = alpha dt^2 / 2 - (omega x alpha) dt^3 / 6. Tested against the finely integrated
    rotation; with omega within about 1 rad/s of the one passed the residual stays well under
    a pixel for 30-ms half-windows at 10 rad/s and 300 rad/s^2. The warps' Jacobians in omega
    are unchanged (phi_k is held fixed)."""
    cross_x, cross_y, cross_z = _cross(wx, wy, wz, ax, ay, az)
    for k in range(bearing_x.shape[0]):
        square = dt[k] * dt[k]
        half_square, sixth_cube = 0.5 * square, square * dt[k] / 6.0
        px = ax * half_square - cross_x * sixth_cube
        py = ay * half_square - cross_y * sixth_cube
        pz = az * half_square - cross_z * sixth_cube
        a, b, _ = rodrigues_coefficients(px * px + py * py + pz * pz)
        x, y = bearing_x[k], bearing_y[k]
        cx, cy, cz = _cross(px, py, pz, x, y, 1.0)
        ccx, ccy, ccz = _cross(px, py, pz, cx, cy, cz)
        rx, ry, rz = x + a * cx + b * ccx, y + a * cy + b * ccy, 1.0 + a * cz + b * ccz
        bearing_x[k] = rx / rz
        bearing_y[k] = ry / rz


def rotation_matrix(rotation_vector) -> np.ndarray:
    """exp([phi]x) for a rotation vector phi (rad), 3x3, with the same coefficients as the warp."""
    phi = np.asarray(rotation_vector, dtype=np.float64)
    a, b, _ = rodrigues_coefficients(float(phi @ phi))
    skew = np.array([[0.0, -phi[2], phi[1]], [phi[2], 0.0, -phi[0]], [-phi[1], phi[0], 0.0]])
    return np.eye(3) + a * skew + b * skew @ skew


# ---------------------------------------------------------------- window kernels (engine)


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def rodrigues_series(s):
    """The Taylor-series branch of ``rodrigues_coefficients`` (valid for a^2 = s < 0.25),
    without a branch so that loops calling it vectorise."""
    a = 1.0 + s * (_A1 + s * (_A2 + s * (_A3 + s * (_A4 + s * (_A5 + s * _A6)))))
    b = _B0 + s * (_B1 + s * (_B2 + s * (_B3 + s * (_B4 + s * (_B5 + s * _B6)))))
    c = _C0 + s * (_C1 + s * (_C2 + s * (_C3 + s * (_C4 + s * (_C5 + s * _C6)))))
    return a, b, c


def series_applies(theta: np.ndarray, dt_bound: float) -> bool:
    """True when every rotation angle |omega| |dt_k| (rad) of the window, at most
    |theta| * dt_bound (s), is below the series threshold, so that the branch-free
    ``rodrigues_series`` is exact to 1e-15."""
    return float(theta[0] ** 2 + theta[1] ** 2 + theta[2] ** 2) * dt_bound ** 2 < _SERIES_ANGLE ** 2


def largest_abs_dt(dt: np.ndarray) -> float:
    """max_k |dt_k| (s), 0 for an empty window."""
    return float(np.abs(dt).max()) if len(dt) else 0.0


@numba.njit(**KERNEL_OPTIONS)
def _rotation_exact_points_series(bearing_x, bearing_y, dt, wx, wy, wz, fx, fy, cx, cy, warped_x, warped_y):
    """Exact rotational warp of every event, Rodrigues coefficients by their series
    (all angles < 0.5 rad): same formula as ``warp_rotation_exact``."""
    for k in range(dt.shape[0]):
        d = dt[k]
        px = wx * d
        py = wy * d
        pz = wz * d
        s = px * px + py * py + pz * pz
        a, b, _ = rodrigues_series(s)
        bx = bearing_x[k]
        by = bearing_y[k]
        ux, uy, uz = _cross(px, py, pz, bx, by, 1.0)
        along = b * (px * bx + py * by + pz)
        scale = 1.0 - b * s
        inverse_z = 1.0 / (scale + a * uz + along * pz)
        warped_x[k] = fx * (scale * bx + a * ux + along * px) * inverse_z + cx
        warped_y[k] = fy * (scale * by + a * uy + along * py) * inverse_z + cy


@numba.njit(**KERNEL_OPTIONS)
def _small_angle_points(bearing_x, bearing_y, dt, wx, wy, wz, fx, fy, cx, cy, warped_x, warped_y):
    """``warp_rotation_small_angle`` of every event (vectorised loop)."""
    for k in range(dt.shape[0]):
        x, y, _, _, _, _, _, _ = warp_rotation_small_angle(bearing_x[k], bearing_y[k], dt[k], wx, wy, wz,
                                                           fx, fy, cx, cy, False)
        warped_x[k] = x
        warped_y[k] = y


@numba.njit(**KERNEL_OPTIONS)
def _small_angle_gradient(bearing_x, bearing_y, dt, d_x, d_y, kept, wx, wy, wz, fx, fy, cx, cy, gradient):
    """sum_k (d_x, d_y)_k . dx'_k/domega for the small-angle warp (vectorised loop; events
    not ``kept`` are selected away)."""
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    for k in range(dt.shape[0]):
        _, _, j00, j01, j02, j10, j11, j12 = warp_rotation_small_angle(bearing_x[k], bearing_y[k], dt[k],
                                                                       wx, wy, wz, fx, fy, cx, cy, True)
        inside = kept[k]
        row_x = d_x[k] if inside else 0.0
        row_y = d_y[k] if inside else 0.0
        g0 += row_x * j00 + row_y * j10
        g1 += row_x * j01 + row_y * j11
        g2 += row_x * j02 + row_y * j12
    gradient[0] = g0
    gradient[1] = g1
    gradient[2] = g2


@numba.njit(**KERNEL_OPTIONS)
def _points_per_event(model, bearing_x, bearing_y, dt, t0, t1, t2, fx, fy, cx, cy, warped_x, warped_y):
    """Any model, event by event through ``warp_one`` (exact warp at large angles, flow)."""
    for k in range(dt.shape[0]):
        x, y, _, _, _, _, _, _ = warp_one(model, bearing_x[k], bearing_y[k], dt[k], t0, t1, t2,
                                          fx, fy, cx, cy, False)
        warped_x[k] = x
        warped_y[k] = y


def warp_points(model: int, bearing_x: np.ndarray, bearing_y: np.ndarray, dt: np.ndarray, theta: np.ndarray,
                fx: float, fy: float, cx: float, cy: float, warped_x: np.ndarray, warped_y: np.ndarray,
                dt_bound: float | None = None) -> None:
    """Warp every event of a window (paper eq. (2)) into ``warped_x``, ``warped_y`` (px).

    bearing_x, bearing_y: undistorted normalized coordinates; dt: t_k - t_ref (s), all
    contiguous float64 (N,); theta: (3,) float64 (rad/s, or px/s padded with 0 for FLOW);
    dt_bound: ``largest_abs_dt(dt)`` (s) if known (saves a pass over dt).
    """
    if dt_bound is None:
        dt_bound = largest_abs_dt(dt)
    if model == ROTATION_EXACT and series_applies(theta, dt_bound):
        _rotation_exact_points_series(bearing_x, bearing_y, dt, theta[0], theta[1], theta[2],
                                      fx, fy, cx, cy, warped_x, warped_y)
    elif model == ROTATION_SMALL_ANGLE:
        _small_angle_points(bearing_x, bearing_y, dt, theta[0], theta[1], theta[2], fx, fy, cx, cy,
                            warped_x, warped_y)
    else:
        _points_per_event(model, bearing_x, bearing_y, dt, theta[0], theta[1], theta[2],
                          fx, fy, cx, cy, warped_x, warped_y)


@numba.njit(**KERNEL_OPTIONS)
def _rotation_exact_gradient_series(warped_x, warped_y, dt, d_x, d_y, kept, wx, wy, wz, fx, fy, cx, cy,
                                    gradient):
    """sum_k (d_x, d_y)_k . dx'_k/domega for the exact rotational warp, without Jacobians.

    With (x, y) the projected normalized point of event k and (d_x, d_y) = dL/dx'_k (per
    px), the pinhole-and-rotation part is the 3-vector
    g_k = d_x fx (-x y, 1 + x^2, -y) + d_y fy (-(1 + y^2), x y, x)
    (see ``warp_rotation_exact``) and the event's term is dt_k J_l(phi_k)^T g_k with
    phi_k = omega dt_k. Expanding J_l^T g = (1 - C s) g + B g x phi + C (g . phi) phi:

        sum_k = sum_k alpha_k g_k + (sum_k beta_k g_k) x omega + omega (omega . sum_k gamma_k g_k)

    with alpha = dt (1 - C s), beta = B dt^2, gamma = C dt^3, s = |omega|^2 dt^2 (B, C by
    their series: every angle < 0.5 rad). Events not ``kept`` (outside the frame)
    contribute nothing: selects, not branches, so that the loop vectorises.
    """
    omega_squared = wx * wx + wy * wy + wz * wz
    inverse_fx = 1.0 / fx
    inverse_fy = 1.0 / fy
    a0 = a1 = a2 = b0 = b1 = b2 = c0 = c1 = c2 = 0.0
    for k in range(dt.shape[0]):
        inside = kept[k]  # a dropped event may sit at NaN (behind the camera): select it away
        x = (warped_x[k] - cx) * inverse_fx if inside else 0.0
        y = (warped_y[k] - cy) * inverse_fy if inside else 0.0
        row_x = d_x[k] * fx if inside else 0.0
        row_y = d_y[k] * fy if inside else 0.0
        xy = x * y
        gx = -row_x * xy - row_y * (1.0 + y * y)
        gy = row_x * (1.0 + x * x) + row_y * xy
        gz = -row_x * y + row_y * x
        d = dt[k]
        s = omega_squared * d * d
        _, b, c = rodrigues_series(s)
        alpha = d * (1.0 - c * s)
        beta = b * d * d
        gamma = c * d * d * d
        a0 += alpha * gx
        a1 += alpha * gy
        a2 += alpha * gz
        b0 += beta * gx
        b1 += beta * gy
        b2 += beta * gz
        c0 += gamma * gx
        c1 += gamma * gy
        c2 += gamma * gz
    along = wx * c0 + wy * c1 + wz * c2
    gradient[0] = a0 + (b1 * wz - b2 * wy) + wx * along
    gradient[1] = a1 + (b2 * wx - b0 * wz) + wy * along
    gradient[2] = a2 + (b0 * wy - b1 * wx) + wz * along


@numba.njit(**KERNEL_OPTIONS)
def _gradient_per_event(model, bearing_x, bearing_y, dt, d_x, d_y, kept, t0, t1, t2, fx, fy, cx, cy, gradient):
    """sum_k (d_x, d_y)_k . dx'_k/dtheta with each event's Jacobian from ``warp_one``."""
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    for k in range(dt.shape[0]):
        if not kept[k]:
            continue
        _, _, j00, j01, j02, j10, j11, j12 = warp_one(model, bearing_x[k], bearing_y[k], dt[k], t0, t1, t2,
                                                      fx, fy, cx, cy, True)
        g0 += d_x[k] * j00 + d_y[k] * j10
        g1 += d_x[k] * j01 + d_y[k] * j11
        g2 += d_x[k] * j02 + d_y[k] * j12
    gradient[0] = g0
    gradient[1] = g1
    gradient[2] = g2


def warp_gradient(model: int, bearing_x: np.ndarray, bearing_y: np.ndarray, dt: np.ndarray, theta: np.ndarray,
                  fx: float, fy: float, cx: float, cy: float, warped_x: np.ndarray, warped_y: np.ndarray,
                  d_x: np.ndarray, d_y: np.ndarray, kept: np.ndarray, gradient: np.ndarray,
                  dt_bound: float | None = None) -> None:
    """Write ``sum_k (d_x, d_y)_k . dx'_k/dtheta`` into gradient (3,) (third entry 0 for FLOW).

    warped_x, warped_y: this theta's ``warp_points`` output (px); d_x, d_y: dL/dx'_k
    (per px); kept: bool (N,), events that voted (others are skipped, whatever their
    d_x, d_y or warped position, e.g. NaN behind the camera); dt_bound as in ``warp_points``.
    """
    if dt_bound is None:
        dt_bound = largest_abs_dt(dt)
    if model == ROTATION_EXACT and series_applies(theta, dt_bound):
        _rotation_exact_gradient_series(warped_x, warped_y, dt, d_x, d_y, kept, theta[0], theta[1], theta[2],
                                        fx, fy, cx, cy, gradient)
    elif model == ROTATION_SMALL_ANGLE:
        _small_angle_gradient(bearing_x, bearing_y, dt, d_x, d_y, kept, theta[0], theta[1], theta[2],
                              fx, fy, cx, cy, gradient)
    else:
        _gradient_per_event(model, bearing_x, bearing_y, dt, d_x, d_y, kept, theta[0], theta[1], theta[2],
                            fx, fy, cx, cy, gradient)

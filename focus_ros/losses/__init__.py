"""The 22 focus losses of "Focus Is All You Need" (Gallego, Gehrig, Scaramuzza, CVPR 2019),
in image space: each returns its value and the exact derivative w.r.t. every pixel of the
image of warped events (IWE), for the adjoint route of the engine.

    from focus_ros.losses import get_loss
    loss = get_loss("variance")
    value, grad_image, grad_timestamp_image = loss.evaluate(iwe)
    score = loss.sign * value          # higher is sharper, whatever the goal

Equation numbers refer to the paper and its supplementary material compiled as one
document: the supplementary continues the main paper's numbering (Supp. Eq. (19) on),
its sections are lettered A (Notation) … K (Analytical Derivatives).

Public face: :class:`FocusLoss` (one registry row), :data:`LOSSES` (the registry: 25 names,
Table 1's 22 losses with the area counted in its 4 weightings), :func:`get_loss`, and
:class:`LossOptions` (every loss parameter, with the paper's defaults).

Where things go: the losses by family in ``statistical`` (variance, MS, MAD, MAV, mean
timestamp), ``support`` (image area), ``histogram`` (entropy, range), ``local`` (local
statistics, Moran's I, Geary's C) and ``derivative`` (gradient / Laplacian / Hessian
magnitudes, DoG, LoG and their variances); shared pieces in ``filters`` (zero-padded filters
and their adjoints), ``smooth`` (smooth |x| and sign), ``reductions`` (BLAS-free inner
products) and ``options``.

A 23rd loss is one function + one registry row + one test row (+ one depth row): write
``f(image, options) -> (value, gradient)`` in the module of its family; add one ``FocusLoss``
row to ``_REGISTRY`` below; add its reference formula to ``REFERENCES`` (and its goal to
``GOALS``) in ``test/test_losses.py``; and say in ``focus_ros.depth.focus`` whether it has a
patch form (``QUADRATIC_LOSSES`` / ``ELEMENTWISE_LOSSES``) or why not (``NOT_ON_PATCHES``;
``test/test_depth_focus.py`` checks that every loss is in one of them). Patch flow evaluates
it tile by tile through the registry, or faster with a batched form in
``focus_ros.flow.patch_losses``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import derivative, histogram, local, statistical, support
from .options import DEFAULT_OPTIONS, LossOptions

__all__ = ["FocusLoss", "LossOptions", "LOSSES", "get_loss"]

BOTH_POLARITY_MODES = ("with", "without")
COUNTS_ONLY = ("without",)  # needs I >= 0; the paper's "with polarity" area: see support.py


@dataclass(frozen=True)
class FocusLoss:
    """One focus loss: metadata from the paper's Tables 1-2 and its evaluation function.

    name: registry key; title: row label of Table 2; equation: where the paper defines it;
    goal: "max" or "min" (Table 1); uses_timestamps: needs the timestamp image (mean
    timestamp only); degenerate_without_polarity: "-" in Table 2's w/o columns;
    polarity_modes: the IWE kinds it makes sense on ("with": b_k = p_k, "without": b_k = 1);
    a loss without "with" needs a count image and rejects negative pixels; spatial: the value
    depends on pixel neighbourhoods (Table 1's "Spatial?" column).
    """

    name: str
    title: str
    equation: str
    goal: str
    function: Callable
    uses_timestamps: bool = False
    degenerate_without_polarity: bool = False
    polarity_modes: tuple = BOTH_POLARITY_MODES
    spatial: bool = False

    @property
    def sign(self) -> float:
        """+1.0 for goal max, −1.0 for goal min: ``sign * value`` is higher when sharper."""
        return 1.0 if self.goal == "max" else -1.0

    def evaluate(self, image: np.ndarray, options: Optional[LossOptions] = None,
                 timestamp_image: Optional[np.ndarray] = None):
        """(value, dvalue/dimage, dvalue/dtimestamp_image or None).

        image: (height, width) IWE in events (float64 C-contiguous avoids a copy);
        for ``mean_timestamp`` the count image without polarity, and
        timestamp_image[y, x] = Σ_k (t_k − t_window_start)[s] · K(x − x'_k), same shape.
        The value is the loss as defined in the paper (not sign-flipped).
        Raises ValueError naming the problem for malformed or non-finite input.
        """
        options = DEFAULT_OPTIONS if options is None else options
        image = _as_image(image, f"{self.name}: image")
        if "with" not in self.polarity_modes:
            _require_counts(self.name, image)
        if self.uses_timestamps:
            if timestamp_image is None:
                raise ValueError(f"{self.name}: needs timestamp_image (sum of event times per pixel, s)")
            timestamp_image = _as_image(timestamp_image, f"{self.name}: timestamp_image")
            if timestamp_image.shape != image.shape:
                raise ValueError(f"{self.name}: timestamp_image shape {timestamp_image.shape} "
                                 f"differs from image shape {image.shape}")
            value, grad_image, grad_timestamps = self.function(image, timestamp_image, options)
            if not np.isfinite(value):
                _raise_non_finite(self.name, "timestamp_image", timestamp_image)
        else:
            value, grad_image = self.function(image, options)
            grad_timestamps = None
        if not np.isfinite(value):
            _raise_non_finite(self.name, "image", image)
            raise ValueError(f"{self.name}: value is {value} for a finite image")
        return float(value), grad_image, grad_timestamps


def _as_image(array, what: str) -> np.ndarray:
    """float64 C-contiguous 2-D view or copy of ``array``; ValueError if not a non-empty 2-D array."""
    array = np.asarray(array)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"{what} must be a non-empty 2-D array (height, width), got shape {array.shape}")
    return np.ascontiguousarray(array, dtype=np.float64)


def _require_counts(loss_name: str, image: np.ndarray) -> None:
    """ValueError at the first negative pixel: the loss needs a count image (b_k = 1)."""
    lowest = int(np.argmin(image))
    if image.flat[lowest] < 0.0:
        y, x = np.unravel_index(lowest, image.shape)
        raise ValueError(f"{loss_name}: image must count events without polarity (b_k = 1), "
                         f"found {image.flat[lowest]:g} at (y={y}, x={x})")


def _raise_non_finite(loss_name: str, what: str, image: np.ndarray) -> None:
    """Raise ValueError at the first non-finite pixel of ``image``, if any."""
    bad = np.flatnonzero(~np.isfinite(image))
    if bad.size:
        y, x = np.unravel_index(int(bad[0]), image.shape)
        raise ValueError(f"{loss_name}: {what} has non-finite value {image[y, x]} at (y={y}, x={x})")


_REGISTRY = (
    FocusLoss("variance", "Variance", "Eq. (4)", "max", statistical.variance),
    FocusLoss("mean_square", "Mean Square", "Eq. (9)", "max", statistical.mean_square),
    FocusLoss("mean_absolute_deviation", "Mean Absolute Deviation", "Eq. (10)", "max",
              statistical.mean_absolute_deviation),
    FocusLoss("mean_absolute_value", "Mean Absolute Value", "Eq. (11)", "max",
              statistical.mean_absolute_value, degenerate_without_polarity=True, polarity_modes=("with",)),
    FocusLoss("entropy", "Entropy", "Eq. (12)", "max", histogram.entropy),
    FocusLoss("area_exponential", "Area (Exp)", "Eq. (8)", "min", support.area_exponential,
              polarity_modes=COUNTS_ONLY),
    FocusLoss("area_gaussian", "Area (Gaussian)", "Eq. (8)", "min", support.area_gaussian,
              polarity_modes=COUNTS_ONLY),
    FocusLoss("area_lorentzian", "Area (Lorentzian)", "Eq. (8)", "min", support.area_lorentzian,
              polarity_modes=COUNTS_ONLY),
    FocusLoss("area_hyperbolic", "Area (Hyperbolic)", "Eq. (8)", "min", support.area_hyperbolic,
              polarity_modes=COUNTS_ONLY),
    FocusLoss("range_exponential", "Range (Exp)", "Eq. (13)", "max", histogram.range_exponential),
    FocusLoss("local_variance", "Local Variance", "Eq. (14)", "max", local.local_variance, spatial=True),
    FocusLoss("local_mean_square", "Local Mean Square", "Supp. Sec. F (Eq. (15) without local mean)",
              "max", local.local_mean_square, spatial=True),
    FocusLoss("local_mean_absolute_deviation", "Local Mean Absolute Dev.", "Supp. Eq. (36)", "max",
              local.local_mean_absolute_deviation, spatial=True),
    FocusLoss("local_mean_absolute_value", "Local Mean Absolute Value",
              "Supp. Sec. F (Supp. Eq. (37) without local mean)", "max", local.local_mean_absolute_value,
              degenerate_without_polarity=True, polarity_modes=("with",), spatial=True),
    FocusLoss("morans_index", "Moran's Index", "Eq. (17)", "min", local.morans_index, spatial=True),
    FocusLoss("gearys_contiguity_ratio", "Geary's Contiguity Ratio", "Eq. (18)", "max",
              local.gearys_contiguity_ratio, spatial=True),
    FocusLoss("gradient_magnitude", "Gradient Magnitude", "Eq. (5)", "max", derivative.gradient_magnitude,
              spatial=True),
    FocusLoss("laplacian_magnitude", "Laplacian Magnitude", "Eq. (6)", "max", derivative.laplacian_magnitude,
              spatial=True),
    FocusLoss("hessian_magnitude", "Hessian Magnitude", "Eq. (7)", "max", derivative.hessian_magnitude, spatial=True),
    FocusLoss("difference_of_gaussians", "Difference of Gauss. (DoG)", "Supp. Eq. (67)", "max",
              derivative.difference_of_gaussians, spatial=True),
    FocusLoss("laplacian_of_gaussian", "Laplacian of the Gauss. (LoG)", "Supp. Sec. K (LoG paragraph)",
              "max", derivative.laplacian_of_gaussian, spatial=True),
    FocusLoss("variance_of_laplacian", "Variance of Laplacian", "Supp. Eq. (69)", "max",
              derivative.variance_of_laplacian, spatial=True),
    FocusLoss("variance_of_gradient", "Variance of Gradient", "Supp. Eq. (73)", "max",
              derivative.variance_of_gradient, spatial=True),
    FocusLoss("variance_of_squared_gradient", "Variance of Squared Gradient", "Supp. Eq. (71)", "max",
              derivative.variance_of_squared_gradient, spatial=True),
    FocusLoss("mean_timestamp", "Mean Time on Pixel", "Sec. 4.4 (after Mitrokhin et al. IROS 2018)", "min",
              statistical.mean_timestamp, uses_timestamps=True, polarity_modes=COUNTS_ONLY),
)

#: All losses by registry name, in the order of the paper's Table 2.
LOSSES: dict[str, FocusLoss] = {loss.name: loss for loss in _REGISTRY}


def get_loss(name: str) -> FocusLoss:
    """The loss registered as ``name``; ValueError listing the valid names otherwise."""
    try:
        return LOSSES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown focus loss {name!r}; valid names: {', '.join(LOSSES)}") from None

"""Parameters of the focus losses (:class:`LossOptions`), with the paper's defaults.

Units: IWE values are counted in *events* (one event adds 1 to the image), distances
in px, histogram widths in bins (one bin = 1/``histogram_bins`` of the image's range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class LossOptions:
    """Parameters of the 22 focus losses; every default is the paper's or argued below.

    - ``abs_sharpness_per_event`` (k, 1/event): smooth absolute value
      ``|x| ≈ log(cosh(k x)) / k``, whose derivative is the paper's smooth sign
      ``tanh(k x)`` (Supp. Sec. K, MAV paragraph: "k ≫ 1"). k = 10 makes the
      transition 0.1 event wide, well below one event, so pixel counts ≥ 1 see |x|.
      Used by MAD, MAV and their local versions.
    - ``local_sigma_px`` (px): Gaussian window G_σ of the local variance / MS / MAD /
      MAV (Eq. (16), Supp. Eq. (38)). The paper gives no value; 1 px keeps the window
      a 3×3-ish neighbourhood, the scale of the IWE's edges.
    - ``spatial_weight_sigma_px`` (px): σ_M of Moran's I / Geary's C weights
      (Eq. (17): "σ_M ≈ 1 pixel").
    - ``dog_sigma1_px`` (px), ``dog_sigma_ratio``: DoG = G_σ1 − G_σ2 with
      σ2 = ratio · σ1 (Supp. Sec. K: σ1 = 1 px, σ2 = 3 σ1).
    - ``dog_truncate_sigmas``: the DoG's two Gaussians are cut at 3 σ (radius
      ``int(3 σ + 0.5)``: 7 and 19 taps instead of 9 and 25 at ``gaussian_truncate_sigmas``;
      the tails left out hold 0.27 % of each kernel's mass, renormalised). Its four 1-D
      passes per value+gradient were the one loss over the 1-ms budget (BENCHMARKS.md).
    - ``log_sigma_px`` (px), ``log_sigma_ratio``: LoG approximated by a DoG with
      σ2 = 1.6 σ1 (Supp. Sec. K), scaled by 1 / ((ratio − 1) σ1²) so that it
      approximates ∇²G_σ1 ∗ I.
    - ``gaussian_truncate_sigmas``: every sampled Gaussian kernel has radius
      ``int(truncate · σ + 0.5)`` taps and unit sum (scipy.ndimage's convention).
    - ``histogram_bins`` and ``histogram_smoothing_sigma_bins``: the IWE's PDF for
      entropy and range: 200 bins over [min, max] of the image, smoothed by a
      Gaussian of 5 bins (Supp. Sec. K, entropy paragraph).
    - ``area_scale_events`` (λ0, events): the area integrand is F(I / λ0) − F(0)
      (Supp. Fig. 6 uses λ0 = 10 on a 31×31 depth patch). With 30,000 events on
      240×180 px (0.7 event/px on average) a pixel is "occupied" from about one
      event on, hence λ0 = 1 event: F saturates on aligned edges (several events)
      and is linear on the thin spread of misaligned ones.
    - ``range_density_scale_per_event`` (λ_r, 1/event): the range integrand is
      F(p_I(z) / λ_r) − F(0), with p_I the PDF of the IWE values (1/event).
      The paper leaves the scale open; 1e-3/event counts a value z as "in the range"
      when more than about 43 of the 43,200 pixels of a DAVIS240 image fall within
      one event of it.
    - ``gradient_magnitude_epsilon`` (events/px): ‖∇I‖ ≈ sqrt(I_x² + I_y² + ε²) in
      the variance of the gradient magnitude (the norm has no derivative at 0, and
      most pixels of an IWE have a zero gradient).
    - ``mean_timestamp_count_epsilon_events`` (events): the mean timestamp image is
      T / (N + ε); ε keeps empty pixels at 0 s and the derivative bounded
      (|∂M/∂N| ≤ t_max / (4 ε)). A pixel with one event keeps 91 % of its mean.
    """

    abs_sharpness_per_event: float = 10.0
    local_sigma_px: float = 1.0
    spatial_weight_sigma_px: float = 1.0
    dog_sigma1_px: float = 1.0
    dog_sigma_ratio: float = 3.0
    dog_truncate_sigmas: float = 3.0
    log_sigma_px: float = 1.0
    log_sigma_ratio: float = 1.6
    gaussian_truncate_sigmas: float = 4.0
    histogram_bins: int = 200
    histogram_smoothing_sigma_bins: float = 5.0
    area_scale_events: float = 1.0
    range_density_scale_per_event: float = 1e-3
    gradient_magnitude_epsilon: float = 1e-2
    mean_timestamp_count_epsilon_events: float = 0.1

    def __post_init__(self) -> None:
        for option in fields(self):
            value = getattr(self, option.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"LossOptions.{option.name} must be a finite number > 0, got {value!r}")
        if not isinstance(self.histogram_bins, int) or self.histogram_bins < 2:
            raise ValueError(f"LossOptions.histogram_bins must be an integer >= 2, got {self.histogram_bins!r}")
        for name in ("dog_sigma_ratio", "log_sigma_ratio"):
            if getattr(self, name) == 1.0:
                raise ValueError(f"LossOptions.{name} must differ from 1 (the DoG would be zero)")


DEFAULT_OPTIONS = LossOptions()

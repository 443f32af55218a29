"""Flow fields predicted from neighbouring patches: what the optical flow estimator's warm start and
borrowing pass start from or lean on (:mod:`focus_ros.estimators.optical_flow`).

- ``fill_from_neighbours``: NaN flows replaced by their known 8-connected neighbours' mean, ring after ring;
- ``fill_affine``: NaN flows replaced by the affine flow field fitted to the known ones (the warm start's
  fill, and the borrowing prior where a patch has too few neighbours);
- ``borrowing_prior``: per patch, the local affine fit of the flows within ``PRIOR_RADIUS`` grid steps.

Flows are (P, 2) px/s arrays over a ``focus_ros.flow.patches.PatchGrid`` (patch p = row * columns + column),
NaN where unknown.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fill_from_neighbours", "fill_affine", "borrowing_prior", "MIN_AFFINE_FLOWS", "PRIOR_RADIUS"]


def fill_from_neighbours(flows: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
    """Flows (P, 2) with every NaN row replaced by the mean of its known 8-connected neighbours
    (``PatchGrid.neighbours``), ring after ring outwards until every patch connected to a known
    one has a value: a patch far from any valid flow gets the flow of the nearest valid ones."""
    flows = np.array(flows, dtype=np.float64, copy=True)
    exists = neighbours >= 0
    missing = ~np.isfinite(flows[:, 0])
    while missing.any():
        neighbour_flows = np.where(exists[..., None], flows[np.maximum(neighbours, 0)], np.nan)
        known = np.isfinite(neighbour_flows[..., 0])
        known_count = known.sum(axis=1)
        fillable = missing & (known_count > 0)
        if not fillable.any():
            break
        total = np.where(known[..., None], neighbour_flows, 0.0).sum(axis=1)
        flows[fillable] = total[fillable] / known_count[fillable, None]
        missing &= ~fillable
    return flows


#: the affine fill needs at least this many known flows (3 parameters per component, and spares)
MIN_AFFINE_FLOWS = 8


def fill_affine(flows: np.ndarray, centers: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
    """Flows (P, 2) px/s with every NaN row replaced by the affine flow field
    v(x, y) = a + B (x, y) fitted by least squares to the known rows at their patch centres
    (P, 2) px, refitted once without the known flows more than 3 median residuals off (wrong
    previous flows); ``fill_from_neighbours`` when fewer than ``MIN_AFFINE_FLOWS`` are known.
    A camera's rotation gives a nearly affine field over a DAVIS-sized sensor (rotation about the
    optical axis: linear in x, y; about x, y: nearly constant), which one patch's neighbours
    alone do not extrapolate."""
    flows = np.array(flows, dtype=np.float64, copy=True)
    known = np.isfinite(flows).all(axis=1)
    if known.sum() < MIN_AFFINE_FLOWS:
        return fill_from_neighbours(flows, neighbours)
    design = np.column_stack([np.ones(len(centers)), centers[:, 0], centers[:, 1]])
    coefficients = np.linalg.lstsq(design[known], flows[known], rcond=None)[0]
    residual = np.linalg.norm(design[known] @ coefficients - flows[known], axis=1)
    inliers = residual <= 3.0 * np.median(residual)
    if MIN_AFFINE_FLOWS <= inliers.sum() < known.sum():
        coefficients = np.linalg.lstsq(design[known][inliers], flows[known][inliers], rcond=None)[0]
    flows[~known] = design[~known] @ coefficients
    return flows


#: the borrowing prior's neighbourhood: patches within this many grid steps (a 5 x 5 block)
PRIOR_RADIUS = 2


def borrowing_prior(flows: np.ndarray, rows: int, columns: int, min_known: int = 3) -> np.ndarray:
    """Per patch, the flow (P, 2) px/s its neighbours' flows predict at its centre: the affine
    field v = a + B d fitted by least squares to the finite flows (P, 2, patch p = row * columns +
    column) of the patches within ``PRIOR_RADIUS`` grid steps d (the patch itself left out),
    their mean where the fit is degenerate (all in a line), NaN where fewer than ``min_known``
    are finite. A smooth flow field (a rotation, a distant scene) is nearly affine over a few
    patches; the mean of one-sided neighbours would be off by the field's slope."""
    image = flows.reshape(rows, columns, 2)
    radius = PRIOR_RADIUS
    padded = np.full((rows + 2 * radius, columns + 2 * radius, 2), np.nan)
    padded[radius:radius + rows, radius:radius + columns] = image
    sums = np.zeros((rows, columns, 3, 3))
    right = np.zeros((rows, columns, 3, 2))
    count = np.zeros((rows, columns))
    total = np.zeros((rows, columns, 2))
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            if dx == 0 and dy == 0:
                continue
            shifted = padded[radius + dy:radius + dy + rows, radius + dx:radius + dx + columns]
            known = np.isfinite(shifted).all(axis=2)
            value = np.where(known[..., None], shifted, 0.0)
            basis = np.array([1.0, dx, dy])
            sums += known[..., None, None] * np.outer(basis, basis)
            right += basis[None, None, :, None] * value[:, :, None, :]
            count += known
            total += value
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count[..., None]
    determinant = np.linalg.det(sums)
    solvable = (count >= min_known) & (determinant > 1e-6 * np.maximum(count, 1) ** 3)
    prior = np.where((count >= min_known)[..., None], mean, np.nan)
    if solvable.any():
        prior[solvable] = np.linalg.solve(sums[solvable], right[solvable])[:, 0, :]
    return prior.reshape(-1, 2)

"""Inner products of images without BLAS.

numpy's ``dot`` / ``vdot`` hand 43,200-pixel inner products to the BLAS library, whose
worker threads, on a machine whose cores are busy, can stall a microsecond-scale call for
milliseconds. This single-threaded loop (summation reassociated so it vectorizes) is fast
and predictable.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _flat_inner_product(first: np.ndarray, second: np.ndarray) -> float:
    total = 0.0
    for index in range(first.size):
        total += first[index] * second[index]
    return total


def inner_product(first: np.ndarray, second: np.ndarray) -> float:
    """Σ first · second over all pixels (arrays of the same shape, C-contiguous)."""
    return float(_flat_inner_product(first.ravel(), second.ravel()))

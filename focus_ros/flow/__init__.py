"""Patch optical flow's engine: what :mod:`focus_ros.estimators.optical_flow` runs.

A window flows through ``patches`` (the grid of square patches, the events each gathers, and
the focus objective of every patch in one call: warp x' = x - (t - t_ref) v, patch IWEs,
losses, adjoint gradients) and ``batched_bfgs`` (one small BFGS problem per patch, all
advanced together); ``neighbours`` predicts a patch's flow from its neighbours' (the warm
start's fill and the borrowing pass's prior); ``validity`` measures a patch's aperture (structure
tensor) and confidence (the focus's curvature); ``patch_losses`` evaluates the registry losses on the stack of patch
images at once; ``pictures`` draws an estimate (arrows over the motion-compensated image
with a scale arrow, flow as colours with a colour-wheel legend; invalid patches never look like
zero flow).

Where things go: a faster form of a registry loss on patch stacks is one function and one
``BATCHED`` row in ``patch_losses`` (any other loss runs tile by tile through the registry);
the estimator's settings, starts and validity checks live in
:mod:`focus_ros.estimators.optical_flow`. Conventions: docs/design.md, section 5.

The submodules are compiled with numba and imported on demand (``from focus_ros.flow.patches
import PatchGrid``); this package imports none of them.
"""

__all__ = ["patches", "patch_losses", "batched_bfgs", "neighbours", "validity", "pictures"]

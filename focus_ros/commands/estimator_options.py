"""Command-line options shared by the commands that run the estimator (estimate, evaluate)."""

from __future__ import annotations

import math

from focus_ros.cli import UserError
from focus_ros.estimators.angular_velocity import ROTATION_WARPS, T_REF_CHOICES
from focus_ros.iwe import KERNELS
from focus_ros.optimize import OPTIMIZERS


def add_estimator_arguments(parser) -> None:
    """--t-ref, --kernel, --warp, --optimizer, --blur-sigma, with the estimator's defaults."""
    parser.add_argument("--t-ref", choices=T_REF_CHOICES, default="middle",
                        help="window reference time (default middle)")
    parser.add_argument("--kernel", choices=tuple(KERNELS), default="bilinear", help="event voting kernel")
    parser.add_argument("--warp", choices=ROTATION_WARPS, default="exact",
                        help="rotation warp: exact exponential map (default) or small angle")
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="cg",
                        help="cg: Fletcher-Reeves conjugate gradient (the paper's, default); bfgs; lbfgs")
    parser.add_argument("--blur-sigma", type=float, default=None, metavar="PX",
                        help="Gaussian blur of the IWE (px), the paper's smooth Dirac delta; 0 = off; "
                             "default: 1 px for the spatial losses (Table 1), 0 for the others")


def check_estimator_arguments(args) -> None:
    """One-line UserError for option values argparse cannot check."""
    if args.blur_sigma is not None and not (math.isfinite(args.blur_sigma) and args.blur_sigma >= 0):
        raise UserError(f"--blur-sigma must be >= 0 px (0 = no blur), got {args.blur_sigma}")

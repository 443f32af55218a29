"""Command-line options shared by the commands that run the estimator (estimate, evaluate)."""

from __future__ import annotations

import math
from dataclasses import replace

from focus_ros.cli import UserError
from focus_ros.estimators.angular_velocity import (ROTATION_WARPS, T_REF_CHOICES, WARM_STARTS,
                                                   AngularVelocitySettings)
from focus_ros.iwe import KERNELS
from focus_ros.optimize import OPTIMIZERS


def add_estimator_arguments(parser, defaults: AngularVelocitySettings) -> None:
    """--t-ref, --kernel, --warp, --optimizer, --value-tolerance, --warm-start, --blur-sigma,
    with the given defaults."""
    parser.add_argument("--t-ref", choices=T_REF_CHOICES, default=defaults.t_ref,
                        help=f"window reference time (default {defaults.t_ref})")
    parser.add_argument("--kernel", choices=tuple(KERNELS), default=defaults.kernel, help="event voting kernel")
    parser.add_argument("--warp", choices=ROTATION_WARPS, default=defaults.warp,
                        help="rotation warp: exact exponential map (default) or small angle")
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default=defaults.optimizer,
                        help=f"cg: Fletcher-Reeves conjugate gradient (the paper's); bfgs; lbfgs "
                             f"(default {defaults.optimizer})")
    parser.add_argument("--value-tolerance", type=float, default=defaults.optimizer_settings.value_tolerance,
                        help="stop when the loss changes by less than this, relatively "
                             f"(default {defaults.optimizer_settings.value_tolerance:g})")
    parser.add_argument("--warm-start", choices=WARM_STARTS, default=defaults.warm_start,
                        help="each window starts from the previous estimate (the paper's) or from the line "
                             f"through the last two (extrapolate) (default {defaults.warm_start})")
    parser.add_argument("--blur-sigma", type=float, default=None, metavar="PX",
                        help="Gaussian blur of the IWE (px), the paper's smooth Dirac delta; 0 = off; "
                             "default: 1 px for the spatial losses (Table 1), 0 for the others")


def settings_from_arguments(args, defaults: AngularVelocitySettings, **fields) -> AngularVelocitySettings:
    """The estimator settings the options above (and ``fields``) describe."""
    return replace(defaults, kernel=args.kernel, t_ref=args.t_ref, warp=args.warp, optimizer=args.optimizer,
                   warm_start=args.warm_start, blur_sigma_px=args.blur_sigma,
                   optimizer_settings=replace(defaults.optimizer_settings, value_tolerance=args.value_tolerance),
                   **fields)


def check_estimator_arguments(args) -> None:
    """One-line UserError for option values argparse cannot check."""
    if not (math.isfinite(args.value_tolerance) and args.value_tolerance >= 0):
        raise UserError(f"--value-tolerance must be >= 0, got {args.value_tolerance}")
    if args.blur_sigma is not None and not (math.isfinite(args.blur_sigma) and args.blur_sigma >= 0):
        raise UserError(f"--blur-sigma must be >= 0 px (0 = no blur), got {args.blur_sigma}")

"""`make demo`: the whole system on embedded defaults, through real ROS 2 topics.

``python -m focus_ros.ros.demos [--part all|rotation|depth] [--duration 1.5] [--output demo_output]``

- rotation (:mod:`focus_ros.ros.demos.rotation`): a simulated DAVIS240C rotation through
  ``angular_velocity_node``, RMS error against ground truth, plots;
- depth (:mod:`focus_ros.ros.demos.depth`): the simulated slider through ``depth_node``,
  depth error of the clouds and of the fused map against ground truth, pictures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from focus_ros.ros.demos import depth, rotation


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(prog="focus_ros demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1.5, help="simulated seconds (default 1.5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss", default="variance", help="focus loss (default variance)")
    parser.add_argument("--output", type=Path, default=Path("demo_output"), help="output folder")
    parser.add_argument("--part", choices=("all", "rotation", "depth"), default="all",
                        help="angular velocity, depth or both (default)")
    parser.add_argument("--slider-duration", type=float, default=2.0,
                        help="simulated seconds of the slider (default 2)")
    parser.add_argument("--keyframe-events", type=int, default=300_000,
                        help="events per depth keyframe (default 300000: ~0.75 s, 0.19 m of the simulated slider)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_arguments(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    status = 0
    if args.part in ("all", "rotation"):
        status = rotation.run(args)
    if args.part in ("all", "depth"):
        status = depth.run(args) or status
    return status


if __name__ == "__main__":
    sys.exit(main())

"""`make demo`: the whole system on embedded defaults, through real ROS 2 topics.

``python -m focus_ros.ros.demos [--part all|rotation|depth] [--duration 1.5] [--output demo_output]``

- rotation (:mod:`focus_ros.ros.demos.rotation`): a simulated DAVIS240C rotation through
  ``angular_velocity_node``, RMS error against ground truth, plots;
- depth (:mod:`focus_ros.ros.demos.depth`): the simulated slider through ``depth_node``,
  depth error of the clouds and of the fused map against ground truth, pictures.

A part that fails says why in one line on stderr, ``demo failed: <reason>; node log: <path>``,
never with a traceback (an unexpected exception becomes its type and message), and the demo
exits 1 (after trying the other part: they are independent). Ctrl-C or SIGTERM stop the node
it runs (:mod:`focus_ros.ros.demos.processes`: nothing is left behind), print ``demo
interrupted`` and exit 130. Exit 0: every part brought its numbers back.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from focus_ros.ros.demos import depth, rotation, session
from focus_ros.ros.demos.session import DemoFailure, DemoInterrupted, describe_exception


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


def failure_line(reason: str, node_log: Path | None) -> str:
    """The one line a failed part prints."""
    return f"demo failed: {reason}" + (f"; node log: {node_log}" if node_log is not None else "")


def run_part(name: str, part, args) -> int:
    """``part.run(args)``; a failure (:class:`DemoFailure`, or any other exception: the demo's
    own bug or a broken environment) printed as one line with the log of the node the part
    started, returned as 1. Ctrl-C goes through (the node is already stopped by then)."""
    logs_before = len(session.started_node_logs)
    try:
        return part.run(args)
    except (KeyboardInterrupt, DemoInterrupted):
        raise
    except DemoFailure as failure:
        reason, node_log = str(failure), failure.node_log
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (issue 30)
        reason, node_log = f"the {name} part raised {describe_exception(error)}", None
    if node_log is None and len(session.started_node_logs) > logs_before:
        node_log = session.started_node_logs[-1]
    print(failure_line(reason, node_log), file=sys.stderr, flush=True)
    return 1


def _interrupt(signal_number, frame) -> None:
    """SIGTERM handled as Ctrl-C: the running part stops its node on the way out (Python's default
    would end the demo on the spot, its node left to the kernel's parent-death signal)."""
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_arguments(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress lines as they come, through a pipe too
    previous_handler = signal.signal(signal.SIGTERM, _interrupt)
    try:
        args.output.mkdir(parents=True, exist_ok=True)
        status = 0
        if args.part in ("all", "rotation"):
            status = run_part("rotation", rotation, args)
        if args.part in ("all", "depth"):
            status = run_part("depth", depth, args) or status
        return status
    except (KeyboardInterrupt, DemoInterrupted) as interrupted:
        detail = str(interrupted) if isinstance(interrupted, DemoInterrupted) else ""
        print("demo interrupted" + (f": {detail}" if detail else ""), file=sys.stderr, flush=True)
        return 130
    except OSError as error:  # the output folder
        print(failure_line(describe_exception(error), None), file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous_handler)


if __name__ == "__main__":
    sys.exit(main())

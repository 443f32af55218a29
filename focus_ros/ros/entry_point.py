"""What every focus_ros node executable does around its node: init, run, one-line errors, shutdown."""

from __future__ import annotations

import sys
from typing import Callable

import rclpy
import rclpy.executors
from rclpy.exceptions import ParameterException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

#: what rclpy raises from a call into rcl on a context already shut down
RCLError = _rclpy.RCLError


def run_node(name: str, make_node: Callable, run: Callable, argv=None) -> int:
    """``ros2 run focus_ros <name>``: build the node, run it, shut down cleanly.

    make_node() -> node; run(node) blocks until done (Ctrl-C / shutdown end it quietly).
    A configuration error (ValueError, FileNotFoundError: a bad parameter, a missing bag;
    rclpy's ParameterException: a value outside its declared range or of the wrong type)
    is printed as one line, exit code 1, no traceback. ``node.stop()`` is called if present.

    rclpy's SIGINT/SIGTERM handler shuts the context down from the signal, so ``rclpy.spin``
    may be inside a wait when it happens and raise RCLError ("the given context is not valid"),
    or inside taking a message and raise a bare RuntimeError from the binding ("Unable to convert
    call argument '0'", seen once in test_node_stop): with the context shut down either is the
    shutdown asked for, not an error.
    """
    rclpy.init(args=argv if argv is not None else sys.argv)
    node = None
    try:
        node = make_node()
        run(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    except (RCLError, RuntimeError):
        if rclpy.ok():
            raise
    except (ValueError, FileNotFoundError, ParameterException) as error:
        print(f"{name}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    finally:
        if node is not None:
            if hasattr(node, "stop"):
                node.stop()
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    return 0

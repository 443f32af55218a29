"""``python -m focus_ros.cli``: the ``focus-ros`` command line."""

import sys

from focus_ros.cli import main

if __name__ == "__main__":
    sys.exit(main())

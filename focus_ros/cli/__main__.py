"""``python -m focus_ros.cli``: the ``focus-ros`` command line."""

import sys

from focus_ros.cli import main

sys.exit(main())

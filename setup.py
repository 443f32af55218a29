"""ament_python package focus_ros (also pip-installable for the local .venv).

``setup.py install`` (what ``colcon build`` runs) and ``setup.py develop`` (``colcon build
--symlink-install``) compile focus_ros's numba kernels into numba's cache for the package as
installed, so that a node's first launch loads them instead of compiling (see the README,
"Compiled kernels"). Skipped when installing into a staging root (wheels, Debian packages: the
files are not where they will run) or with FOCUS_ROS_SKIP_KERNEL_COMPILE=1; a failure is a
warning, not a failed install (the kernels then compile at first use, as without this step).
"""

import os
import subprocess
import sys
from glob import glob

from setuptools import find_packages, setup
from setuptools.command.develop import develop
from setuptools.command.install import install

PACKAGE = "focus_ros"


def compile_kernels(import_path: str) -> None:
    """Run ``python -m focus_ros.kernels --fresh --if-changed`` on the focus_ros found in
    ``import_path`` (the installed copy, not this source tree: numba caches per source file
    location). colcon reinstalls at every build: --if-changed makes an unchanged package's
    rebuild cost seconds, not a recompilation."""
    if os.environ.get("FOCUS_ROS_SKIP_KERNEL_COMPILE"):
        print("focus_ros: FOCUS_ROS_SKIP_KERNEL_COMPILE set: kernels compile at first use")
        return
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [import_path] + [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]))
    # cwd = import_path: `python -m` puts the working directory first on sys.path
    completed = subprocess.run([sys.executable, "-m", "focus_ros.kernels", "--fresh", "--if-changed"], cwd=import_path,
                               env=environment)
    if completed.returncode:
        print(f"focus_ros: warning: compiling the kernels failed (exit status {completed.returncode}): "
              "they compile at a node's first launch instead", file=sys.stderr)


class InstallAndCompile(install):
    """``install``, then the kernels compiled for the installed package (not into a staging --root)."""

    def run(self):
        super().run()
        if not self.root:
            compile_kernels(os.path.abspath(self.install_lib))


class DevelopAndCompile(develop):
    """``develop``, then the kernels compiled for the package as developed (imported from egg_path)."""

    def run(self):
        super().run()
        if not self.uninstall:
            compile_kernels(os.path.abspath(self.egg_path))


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*")),
    ],
    install_requires=["setuptools", "numpy", "numba", "scipy", "rosbags", "pyyaml", "tqdm"],
    # `colcon test` runs pytest only when the package names it as its test requirement;
    # ray: the evaluate commands' --ray (evaluation grids on a Ray cluster, focus_ros/evaluation/grid.py)
    extras_require={"test": ["pytest"], "ray": ["ray"]},
    zip_safe=True,
    maintainer="focus_ros developers",
    maintainer_email="focus_ros@example.org",
    description="Motion compensation for event cameras with the focus losses of Gallego et al. 2019",
    license="MIT",
    cmdclass={"install": InstallAndCompile, "develop": DevelopAndCompile},
    entry_points={
        "console_scripts": [
            "focus-ros = focus_ros.cli:main",
            "angular_velocity_node = focus_ros.ros.angular_velocity_node:main",
            "replay_node = focus_ros.ros.replay_node:main",
            "optical_flow_node = focus_ros.ros.optical_flow_node:main",
            "depth_node = focus_ros.ros.depth_node:main",
        ],
    },
)

"""ament_python package focus_ros (also pip-installable for the local .venv)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "focus_ros"

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
    # `colcon test` runs pytest only when the package names it as its test requirement
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="focus_ros developers",
    maintainer_email="focus_ros@example.org",
    description="Motion compensation for event cameras with the focus losses of Gallego et al. 2019",
    license="MIT",
    entry_points={
        "console_scripts": [
            "focus-ros = focus_ros.cli:main",
            "angular_velocity_node = focus_ros.ros.angular_velocity_node:main",
            "replay_node = focus_ros.ros.replay_node:main",
            "optical_flow_node = focus_ros.ros.optical_flow_node:main",
        ],
    },
)

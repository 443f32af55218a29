"""Camera trajectories read from files: the Event Camera Dataset's groundtruth.txt and a bag's
PoseStamped or Odometry topic (focus_ros.sources.trajectory_readers)."""

import numpy as np
import pytest

from test_poses import S, _random_trajectory
from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources.bags import BagTopics, read_bag_poses, typestore_with_event_types, write_bag
from focus_ros.sources.ecd import write_groundtruth
from focus_ros.sources.recording import Poses, Recording
from focus_ros.sources.trajectory_readers import read_bag_trajectory, read_groundtruth_trajectory


def test_groundtruth_file(tmp_path):
    t, position, quaternion = _random_trajectory(6)
    write_groundtruth(tmp_path / "groundtruth.txt", Poses(t, position, quaternion))
    trajectory = read_groundtruth_trajectory(tmp_path)
    np.testing.assert_allclose(trajectory.position_m, position, atol=1e-9)
    with pytest.raises(FileNotFoundError, match="no poses"):
        read_groundtruth_trajectory(tmp_path / "missing")


def _odometry_bag(path, t, position, quaternion):
    from rosbags.rosbag2 import Writer

    store = typestore_with_event_types(2)
    Odometry = store.types["nav_msgs/msg/Odometry"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    Pose = store.types["geometry_msgs/msg/Pose"]
    PoseWithCovariance = store.types["geometry_msgs/msg/PoseWithCovariance"]
    Twist = store.types["geometry_msgs/msg/Twist"]
    TwistWithCovariance = store.types["geometry_msgs/msg/TwistWithCovariance"]
    Point = store.types["geometry_msgs/msg/Point"]
    Quaternion = store.types["geometry_msgs/msg/Quaternion"]
    Vector3 = store.types["geometry_msgs/msg/Vector3"]
    with Writer(path, version=8) as writer:
        connection = writer.add_connection("/vio/odometry", "nav_msgs/msg/Odometry", typestore=store)
        for stamp, p, q in zip(t, position, quaternion):
            message = Odometry(
                header=Header(stamp=Time(sec=int(stamp // S), nanosec=int(stamp % S)), frame_id="world"),
                child_frame_id="camera",
                pose=PoseWithCovariance(pose=Pose(position=Point(x=p[0], y=p[1], z=p[2]),
                                                  orientation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])),
                                        covariance=np.zeros(36)),
                twist=TwistWithCovariance(twist=Twist(linear=Vector3(x=0.0, y=0.0, z=0.0),
                                                      angular=Vector3(x=0.0, y=0.0, z=0.0)),
                                          covariance=np.zeros(36)))
            writer.write(connection, int(stamp), store.serialize_cdr(message, "nav_msgs/msg/Odometry"))


def test_bag_poses_pose_stamped_and_odometry(tmp_path):
    t, position, quaternion = _random_trajectory(8)
    events = Events.from_arrays([1, 2], [3, 4], [t[0], t[1]], [1, 0])
    recording = Recording(events, Calibration.davis240c(), poses=Poses(t, position, quaternion))
    write_bag(tmp_path / "stamped", recording)
    trajectory = read_bag_trajectory(tmp_path / "stamped")
    np.testing.assert_allclose(trajectory.position_m, position)
    assert trajectory.source.endswith(BagTopics().poses)

    _odometry_bag(tmp_path / "odometry", t, position, quaternion)
    poses, topic = read_bag_poses(tmp_path / "odometry")
    assert topic == "/vio/odometry"
    trajectory = read_bag_trajectory(tmp_path / "odometry")
    np.testing.assert_array_equal(trajectory.t_ns, t)
    np.testing.assert_allclose(trajectory.orientation_xyzw, quaternion / np.linalg.norm(quaternion, axis=1)[:, None])

    write_bag(tmp_path / "no_poses", Recording(events, Calibration.davis240c()))
    with pytest.raises(ValueError, match="no poses"):
        read_bag_trajectory(tmp_path / "no_poses")

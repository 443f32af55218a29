"""Bags through rosbags: write a Recording (real slice events + made-up IMU / poses) as
ROS 1, ROS 2 mcap and ROS 2 sqlite3, read it back identically; corrupt bags and missing
topics give BagError naming the file."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import slice_folder
from test_info_cli import focus_ros_cli
from focus_ros import codecs
from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources import bags
from focus_ros.sources.ecd import read_events
from focus_ros.sources.errors import BagError
from focus_ros.sources.recording import ImuSamples, Poses, Recording

FORMATS = {
    "ros1": ("seq.bag", dict(version=1)),
    "ros2 mcap": ("seq_mcap", dict(version=2, storage="mcap")),
    "ros2 sqlite3": ("seq_sqlite", dict(version=2, storage="sqlite3")),
    "ros2 mcap EventPacket mono": ("seq_mono", dict(version=2, storage="mcap", event_encoding="mono")),
    "ros2 sqlite3 EventPacket evt3": ("seq_evt3", dict(version=2, storage="sqlite3", event_encoding="evt3")),
    "ros2 mcap EventPacket libcaer_cmp": ("seq_cmp", dict(version=2, storage="mcap", event_encoding="libcaer_cmp")),
    "ros2 sqlite3 EventPacket libcaer": ("seq_libcaer", dict(version=2, storage="sqlite3", event_encoding="libcaer")),
    "ros1 EventPacket evt3": ("seq_evt3.bag", dict(version=1, event_encoding="evt3")),
    "ros1 EventPacket libcaer_cmp": ("seq_cmp.bag", dict(version=1, event_encoding="libcaer_cmp")),
}


@pytest.fixture(scope="module")
def recording() -> Recording:
    events = read_events(slice_folder("boxes_rotation"))
    rng = np.random.default_rng(7)
    t = np.arange(events.t[0] - 3_000_000, events.t[-1] + 1_000_000, 1_000_000)
    quaternions = rng.normal(size=(len(t), 4))
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    calibration = Calibration(240, 180, 199.1, 198.8, 132.2, 110.7, (-0.37, 0.15, -3e-4, -7.6e-4, 0.01))
    return Recording(events=events, calibration=calibration,
                     imu=ImuSamples(t, rng.normal(size=(len(t), 3)), rng.normal(size=(len(t), 3))),
                     poses=Poses(t, rng.normal(size=(len(t), 3)), quaternions))


@pytest.fixture(scope="module")
def written(recording, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bags")
    paths = {}
    for name, (file_name, options) in FORMATS.items():
        paths[name] = folder / file_name
        bags.write_bag(paths[name], recording, events_per_message=7000, **options)
    return paths


def expected_events(recording: Recording, name: str) -> Events:
    events = recording.events
    if "EventPacket" in name and "mono" not in name:  # microsecond clocks
        return Events(events.x, events.y, events.t // 1000 * 1000, events.p)
    return events


@pytest.mark.parametrize("name", FORMATS)
def test_write_then_read_gives_the_same_recording(recording, written, name):
    back = bags.read_bag(written[name])
    assert back.events.equals(expected_events(recording, name))
    assert back.calibration == recording.calibration
    for field in ("t", "angular_velocity", "linear_acceleration"):
        assert np.array_equal(getattr(back.imu, field), getattr(recording.imu, field)), field
    for field in ("t", "position", "orientation"):
        assert np.array_equal(getattr(back.poses, field), getattr(recording.poses, field)), field


@pytest.mark.parametrize("name", FORMATS)
def test_event_messages_stream_with_auto_detected_topic(recording, written, name):
    messages = list(bags.iter_bag_events(written[name]))
    assert [len(events) for events, _ in messages] == [7000] * 4 + [2000]
    assert all(info.width == 240 and info.height == 180 for _, info in messages)
    assert Events.concatenate([e for e, _ in messages]).equals(expected_events(recording, name))


def test_bag_version_and_topics(written):
    assert bags.bag_version(written["ros1"]) == 1
    assert bags.bag_version(written["ros2 mcap"]) == 2
    reader = bags.open_bag(written["ros1"])
    try:
        assert bags.bag_topics(reader) == {"/dvs/events": "dvs_msgs/msg/EventArray",
                                           "/dvs/imu": "sensor_msgs/msg/Imu",
                                           "/dvs/camera_info": "sensor_msgs/msg/CameraInfo",
                                           "/optitrack/davis": "geometry_msgs/msg/PoseStamped"}
    finally:
        reader.close()


def test_ros1_event_messages_match_rosbags_deserializer(recording, written):
    """The stored ROS 1 bytes, read by rosbags' own deserializer, hold the same events."""
    store = bags.typestore_with_event_types(1)
    reader = bags.open_bag(written["ros1"])
    try:
        connection = next(c for c in reader.connections if c.topic == "/dvs/events")
        _, _, raw = next(iter(reader.messages(connections=[connection])))
    finally:
        reader.close()
    message = store.deserialize_ros1(raw, "dvs_msgs/msg/EventArray")
    first = recording.events[:7000]
    assert len(message.events) == 7000
    for index in (0, 1, 3333, 6999):
        event = message.events[index]
        assert (event.x, event.y, event.ts.sec * 10**9 + event.ts.nanosec, event.polarity) == (
            first.x[index], first.y[index], first.t[index], bool(first.p[index] > 0))


def test_replay_messages_of_a_ros1_bag_are_ros2_cdr(recording, written):
    source = bags.open_bag_messages(written["ros1"])
    store = bags.typestore_with_event_types(2)
    events, imu_rates = [], []
    for topic, msgtype, _, payload, count, first in source.messages():
        if msgtype == "dvs_msgs/msg/EventArray":
            decoded, _ = codecs.decode_event_array(payload)
            assert len(decoded) == count and decoded.t[0] == first
            events.append(decoded)
        elif msgtype == "sensor_msgs/msg/Imu":
            message = store.deserialize_cdr(payload, msgtype)
            imu_rates.append((message.angular_velocity.x, message.angular_velocity.y, message.angular_velocity.z))
        elif msgtype == "sensor_msgs/msg/CameraInfo":
            message = store.deserialize_cdr(payload, msgtype)
            assert bags.calibration_from_camera_info(message) == recording.calibration
    assert Events.concatenate(events).equals(recording.events)
    assert np.array_equal(np.array(imu_rates), recording.imu.angular_velocity)


# ----------------------------------------------------------------------------------------
# Errors


def bag_payload_file(path):
    """The largest file of a bag (the .bag itself, or the storage file of a ROS 2 folder)."""
    if path.is_file():
        return path
    return max((p for p in path.iterdir() if p.name != "metadata.yaml"), key=lambda p: p.stat().st_size)


@pytest.mark.parametrize("name", ["ros1", "ros2 mcap", "ros2 sqlite3"])
@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_bag_raises_bag_error_after_the_good_events(recording, written, tmp_path, name, keep):
    import shutil

    copy = tmp_path / written[name].name
    if written[name].is_dir():
        shutil.copytree(written[name], copy)
    else:
        shutil.copy(written[name], copy)
    payload = bag_payload_file(copy)
    data = payload.read_bytes()
    payload.write_bytes(data[:int(len(data) * keep)])
    received = []
    with pytest.raises(BagError, match=str(copy)):
        for events, _ in bags.iter_bag_events(copy):
            received.append(events)
    got = Events.concatenate(received)
    assert got.equals(recording.events[:len(got)])  # a prefix, never wrong events


def test_missing_paths_topics_and_types(written, tmp_path):
    with pytest.raises(BagError, match="bag not found"):
        bags.read_bag(tmp_path / "absent.bag")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(BagError, match="not a bag"):
        bags.read_bag(tmp_path / "notes.txt")
    with pytest.raises(BagError, match="topic /nope not in the bag"):
        list(bags.iter_bag_events(written["ros2 mcap"], topic="/nope"))
    with pytest.raises(BagError, match="topic /dvs/imu has type sensor_msgs/msg/Imu"):
        list(bags.iter_bag_events(written["ros2 mcap"], topic="/dvs/imu"))
    with pytest.raises(BagError, match="topic /other/imu not in the bag"):
        bags.read_bag(written["ros1"], topics=bags.BagTopics(imu="/other/imu"), require=("imu",))
    with pytest.raises(BagError, match="topic /x not in the bag"):
        bags.open_bag_messages(written["ros1"], ["/x"])


def test_writer_refuses_bad_arguments(recording, written, tmp_path):
    with pytest.raises(ValueError, match="already exists"):
        bags.write_bag(written["ros1"], recording, version=1)
    with pytest.raises(ValueError, match="must end in .bag"):
        bags.write_bag(tmp_path / "x.db", recording, version=1)
    with pytest.raises(ValueError, match="storage"):
        bags.write_bag(tmp_path / "y", recording, version=2, storage="zip")


@pytest.mark.parametrize("encoding", codecs.SUPPORTED_PACKET_ENCODINGS)
def test_replay_counts_the_events_of_event_packets(recording, tmp_path, encoding):
    """Paced replay needs each message's event count and first time, in the subscriber's
    clock: ROS time, as the node's decoder gives it."""
    path = tmp_path / f"packets_{encoding}"
    bags.write_bag(path, recording, version=2, event_encoding=encoding, events_per_message=7000)
    counts, firsts = [], []
    for _, msgtype, _, payload, count, first in bags.open_bag_messages(path).messages():
        if msgtype == "event_camera_msgs/msg/EventPacket":
            counts.append(count)
            firsts.append(first)
    assert sum(counts) == len(recording.events) and max(counts) == 7000
    subscriber = codecs.EventMessageDecoder("event_camera_msgs/EventPacket")  # as the node's
    decoded = [subscriber(payload)[0]
               for _, msgtype, _, payload, _, _ in bags.open_bag_messages(path).messages()
               if msgtype == "event_camera_msgs/msg/EventPacket"]
    assert firsts == [int(events.t[0]) for events in decoded]
    # ROS time: the recording's own times (to the microsecond where the encoding has no ns)
    expected = recording.events.t[::7000]
    assert np.array_equal(firsts, expected if encoding == "mono" else expected // 1000 * 1000)


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_a_cut_ros1_bag_gives_back_the_events_recorded_before_the_cut(recording, written, tmp_path, keep):
    """A recording cut short has no index; its records are read one by one up to the cut."""
    data = written["ros1"].read_bytes()
    cut = tmp_path / "cut.bag"
    cut.write_bytes(data[:int(len(data) * keep)])
    received = []
    with pytest.raises(BagError, match=r"damaged ROS 1 bag .*read \d+ event messages record by record, stopped at byte"):
        for events, _ in bags.iter_bag_events(cut):
            received.append(events)
    got = Events.concatenate(received)
    # most of what was written before the cut comes back, exactly, as a prefix
    assert len(got) >= 0.5 * keep * len(recording.events)
    assert got.equals(recording.events[:len(got)])


# ----------------------------------------------------------------------------------------
# Bags whose types are stored as ROS 2 IDL (rosbag2's "ros2idl")

IDL_DELIMITER = "=" * 80 + "\n"
#: the dependencies rosbag2 follows in an .idl text (its IDL_FIELD_TYPE_REGEX)
IDL_INCLUDE = re.compile(r'(?:^|\n)#include\s+(?:"|<)([a-zA-Z0-9_/]+)\.idl(?:"|>)')


def msg_file(msgtype: str) -> Path:
    """The .msg of a type: this repository's interfaces/, else the installed ROS share folders."""
    package, _, name = msgtype.split("/")
    prefixes = [Path(__file__).resolve().parents[1] / "interfaces"]
    prefixes += [Path(p) / "share" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(Path(sys.prefix) / "share")
    for prefix in prefixes:
        if (prefix / package / "msg" / f"{name}.msg").is_file():
            return prefix / package / "msg" / f"{name}.msg"
    pytest.skip(f"no {package}/msg/{name}.msg installed (looked in {', '.join(map(str, prefixes))})")


def rosidl_idl(msgtype: str, folder: Path) -> str:
    """The .idl that rosidl_adapter generates from a type's .msg (msg.idl.em), as ROS installs it."""
    from rosidl_adapter.msg import convert_msg_to_idl

    source = msg_file(msgtype)
    with contextlib.redirect_stdout(io.StringIO()):  # it says what it reads and writes
        written = convert_msg_to_idl(source.parents[1], msgtype.split("/")[0], Path("msg") / source.name, folder)
    return Path(written).read_text(encoding="iso-8859-1")


def rosbag2_idl_definition(msgtype: str, folder: Path) -> str:
    """A type's complete definition in rosbag2's ros2idl form (rosbag2_cpp
    LocalMessageDefinitionSource::get_full_text when no .msg is found): the type's .idl, then
    each .idl it includes, depth first, each after an 80 '=' line and 'IDL: package/msg/Name'."""
    seen = set()

    def append(name: str) -> str:
        text = rosidl_idl(name, folder)
        for dependency in sorted(set(IDL_INCLUDE.findall(text))):
            if dependency not in seen:
                seen.add(dependency)
                text += "\n" + IDL_DELIMITER + f"IDL: {dependency}\n" + append(dependency)
        return text

    return IDL_DELIMITER + f"IDL: {msgtype}\n" + append(msgtype)


def copy_with_idl_definitions(source: Path, target: Path, folder: Path, storage: str = "mcap") -> None:
    """The same messages (same bytes, same log times) in a bag whose stored definitions are ros2idl
    (MCAP schemas, or sqlite3's message_definitions table), with the type hashes (RIHS01) rosbag2 records."""
    from contextlib import closing

    from rosbags.rosbag2 import StoragePlugin, Writer

    store = bags.typestore_with_event_types(2)
    with closing(bags.open_bag(source)) as reader, \
            Writer(target, version=9, storage_plugin=StoragePlugin[storage.upper()]) as writer:
        connections = {c.id: writer.add_connection(c.topic, c.msgtype, msgdef=rosbag2_idl_definition(c.msgtype, folder),
                                                   rihs01=store.hash_rihs01(c.msgtype))
                       for c in reader.connections}
        for connection, t_ns, raw in reader.messages():
            writer.write(connections[connection.id], t_ns, raw)


@pytest.fixture(scope="module")
def idl_bags(recording, tmp_path_factory):
    """(the recording written normally as libcaer_cmp EventPackets, the same with ros2idl schemas
    in MCAP, the same with ros2idl definitions in sqlite3)."""
    folder = tmp_path_factory.mktemp("idl")
    normal, idl, idl_sqlite3 = folder / "normal", folder / "idl", folder / "idl_sqlite3"
    bags.write_bag(normal, recording, version=2, storage="mcap", event_encoding="libcaer_cmp", events_per_message=7000)
    copy_with_idl_definitions(normal, idl, folder)
    copy_with_idl_definitions(normal, idl_sqlite3, folder, "sqlite3")
    return normal, idl, idl_sqlite3


def test_the_idl_bag_is_what_rosbag2_writes(idl_bags, tmp_path):
    """The bag under test holds ros2idl schemas of rosidl_adapter's generated text, #include lines
    and all (what rosbags could not parse), and the IDL is the one ROS installs."""
    _, idl, idl_sqlite3 = idl_bags
    (storage,) = idl.glob("*.mcap")
    data = storage.read_bytes()
    assert b"ros2idl" in data and b"ros2msg" not in data
    assert b"// generated from rosidl_adapter/resource/msg.idl.em" in data
    assert b'#include "std_msgs/msg/Header.idl"' in data and b"IDL: builtin_interfaces/msg/Time" in data
    (database,) = idl_sqlite3.glob("*.db3")
    with contextlib.closing(sqlite3.connect(database)) as connection:
        assert {row[0] for row in connection.execute("SELECT encoding FROM message_definitions")} == {"ros2idl"}
    installed = Path(sys.prefix) / "share" / "sensor_msgs" / "msg" / "CameraInfo.idl"
    if installed.is_file():  # the generator's output, byte for byte
        assert rosidl_idl("sensor_msgs/msg/CameraInfo", tmp_path) == installed.read_text(encoding="iso-8859-1")


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_bag_with_idl_definitions_reads_as_the_same_bag_written_normally(recording, idl_bags, storage):
    normal, idl, idl_sqlite3 = idl_bags
    back = bags.read_bag(idl if storage == "mcap" else idl_sqlite3)
    assert back.events.equals(expected_events(recording, "EventPacket libcaer_cmp"))
    assert back.events.equals(bags.read_bag(normal).events)
    assert back.calibration == recording.calibration  # CameraInfo deserialized through the IDL-defined type
    for field in ("t", "angular_velocity", "linear_acceleration"):
        assert np.array_equal(getattr(back.imu, field), getattr(recording.imu, field)), field
    assert np.array_equal(back.poses.orientation, recording.poses.orientation)


def test_focus_ros_info_and_estimate_read_a_bag_with_idl_definitions(recording, idl_bags, tmp_path):
    normal, idl, _ = idl_bags
    reports = {}
    for path in (normal, idl):
        result = focus_ros_cli("info", path, "--json", "--quiet")
        assert result.returncode == 0, result.stderr
        reports[path] = json.loads(result.stdout)
    (stream,) = reports[idl]["event_streams"]
    assert stream["events"] == len(recording.events) and stream["encodings"] == ["libcaer_cmp"]
    assert reports[idl]["event_streams"] == reports[normal]["event_streams"]
    assert reports[idl]["camera_info"] == ["/dvs/camera_info"] and reports[idl]["camera_info_unusable"] == {}
    outputs = {}
    for path in (normal, idl):
        output = tmp_path / f"{path.name}.csv"
        result = focus_ros_cli("estimate", path, "-o", output, "--window-events", "7000", "--max-windows", "3",
                               "--quiet")
        assert result.returncode == 0, result.stderr
        outputs[path] = output.read_text()
    assert len(outputs[idl].splitlines()) == 4 and outputs[idl] == outputs[normal]

"""The ros-event-camera projects' own test bags decode to exactly what those projects'
tests expect (../shared/data/peer_bags, see its README): checksums of x, y, polarity and
times in the codec's sensor time (event_camera_codecs test/decoder_test.cpp), ON/OFF and
trigger counts (event_camera_py tests/test_1.py). Then the same bags as users read them:
ROS time, ROS 1, a metadata.yaml without storage identifier."""

from __future__ import annotations

import shutil
from contextlib import closing

import numpy as np
import pytest

from conftest import peer_bag
from focus_ros import codecs
from focus_ros.events import Events
from focus_ros.sources import bags
from focus_ros.sources.errors import BagError

U64 = 1 << 64


def sensor_time_packets(path):
    """(Events in the codec's sensor time, info) per message, decoded as event_camera_codecs
    does: one decoder state for the topic, no mapping to ROS time."""
    version = bags.bag_version(path)
    with closing(bags.open_bag(path)) as reader:
        stream = codecs.EventMessageDecoder(reader.connections[0].msgtype, ros1=version == 1)
        for _, _, raw in reader.messages():
            yield stream.decode_sensor_time(raw)


def checksums(packets) -> dict:
    """Sums as the projects' tests take them (uint64 arithmetic for t)."""
    sums = dict(t=0, x=0, y=0, p=0, off=0, on=0, trigger_t=0, trigger_edge=0, trigger_id=0,
                edge0=0, edge1=0, messages=0)
    for events, info in packets:
        sums["t"] = (sums["t"] + int(events.t.astype(np.uint64).sum(dtype=np.uint64))) % U64
        sums["x"] += int(events.x.sum(dtype=np.int64))
        sums["y"] += int(events.y.sum(dtype=np.int64))
        sums["on"] += int(np.count_nonzero(events.p > 0))
        sums["off"] += int(np.count_nonzero(events.p < 0))
        triggers = info.triggers
        sums["trigger_t"] += int(triggers.t.sum())
        sums["trigger_edge"] += int(triggers.edge.sum())
        sums["trigger_id"] += int(triggers.id.sum())
        sums["edge0"] += int(np.count_nonzero(triggers.edge == 0))
        sums["edge1"] += int(np.count_nonzero(triggers.edge == 1))
        sums["messages"] += 1
    sums["p"] = sums["on"]
    return sums


def test_evt3_trigger_bag_matches_event_camera_codecs():
    sums = checksums(sensor_time_packets(peer_bag("event_camera_codecs/test_data_evt3_trigger")))
    # decoder_test.cpp, evt3 test: CD (t, x, y, p) and trigger (t, edge, id) sums
    assert (sums["t"], sums["x"], sums["y"], sums["p"]) == (1222326831810000, 42078718, 31656267, 41439)
    assert (sums["trigger_t"], sums["trigger_edge"], sums["trigger_id"]) == (29096982000, 1, 0)
    assert sums["messages"] == 105


def test_libcaer_rollover_bag_matches_event_camera_codecs():
    path = peer_bag("event_camera_codecs/test_data_libcaer_rollover")
    packets = list(sensor_time_packets(path))
    sums = checksums(packets)
    # libcaer_decode: sums mod 2^64 (the bag holds a 32-bit microsecond rollover)
    assert (sums["t"], sums["x"], sums["y"], sums["p"]) == (15762826572202229126, 111651612, 82801007, 181908)
    assert sums["messages"] == 201
    # libcaer_summarize: first / last CD time and OFF / ON counts of the first message
    first, _ = packets[0]
    assert (int(first.t[0]), int(first.t[-1])) == (1702309120762236018, 1702309120772213018)
    assert (np.count_nonzero(first.p < 0), np.count_nonzero(first.p > 0)) == (741, 872)
    # time keeps going forward across the rollover (time_base jumps, stamps restart)
    firsts = np.array([int(events.t[0]) for events, _ in packets])
    assert np.all(np.diff(firsts) > 0)
    assert len({info.time_base for _, info in packets}) == 2


def test_legacy_event_array_mono_bag_matches_event_camera_codecs():
    path = peer_bag("event_camera_codecs/test_data_mono_cd")
    with closing(bags.open_bag(path)) as reader:
        assert bags.bag_topics(reader) == {"/event_camera/events": "event_array_msgs/msg/EventArray"}
    sums = checksums(sensor_time_packets(path))
    assert (sums["t"], sums["x"], sums["y"], sums["p"]) == (4950000, 34450, 26450, 50)


@pytest.mark.parametrize("name", ["test_events_1", "test_events_1.bag"], ids=["ROS 2", "ROS 1"])
def test_event_camera_py_bags_match_its_tests(name):
    sums = checksums(sensor_time_packets(peer_bag(f"event_camera_py/{name}")))
    # tests/test_1.py: OFF / ON counts; sum of CD and trigger times in microseconds
    assert (sums["off"], sums["on"]) == (218291, 125183)
    assert (sums["t"] + sums["trigger_t"]) // 1000 == 2885601049874
    # its EventCounter counts edge 0 as "rise" and asserts 2078 of them (its falling-edge
    # check repeats the rising one); the bag holds 2079 triggers of edge 1
    assert sums["edge0"] == 2078 and sums["edge1"] == 2079
    assert sums["messages"] == 517


def header_stamps(path) -> np.ndarray:
    return np.array([info.stamp_ns for _, info in bags.iter_bag_events(path)])


@pytest.mark.parametrize("relative", ["event_camera_codecs/test_data_evt3_trigger",
                                      "event_camera_codecs/test_data_libcaer_rollover",
                                      "event_camera_py/test_events_1.bag"])
def test_readers_give_ros_time_within_the_header_stamps(relative):
    """The readers' events: the codec's sensor time plus one constant (0 for libcaer, whose
    driver stamps host time), and so inside the span of the header stamps."""
    path = peer_bag(relative)
    sensor = Events.concatenate(events for events, _ in sensor_time_packets(path))
    read = list(bags.iter_bag_events(path))
    ros = Events.concatenate(events for events, _ in read)
    stamps = np.array([info.stamp_ns for _, info in read])
    offsets = np.unique(ros.t - sensor.t)
    assert len(offsets) == 1
    if "libcaer" in relative:
        assert offsets[0] == 0
    else:  # the camera clock moved onto the first packet with events
        first = next(info.stamp_ns for events, info in read if len(events))
        assert int(ros.t[0]) == first
    period = np.median(np.diff(stamps))  # one message: events precede their stamp by up to that
    assert stamps.min() - 2 * period <= ros.t.min() and ros.t.max() <= stamps.max() + 2 * period


def test_ros1_and_ros2_copies_read_the_same():
    ros2 = list(bags.iter_bag_events(peer_bag("event_camera_py/test_events_1")))
    ros1 = list(bags.iter_bag_events(peer_bag("event_camera_py/test_events_1.bag")))
    assert len(ros1) == len(ros2) == 517
    assert Events.concatenate(e for e, _ in ros1).equals(Events.concatenate(e for e, _ in ros2))
    assert [info.stamp_ns for _, info in ros1] == [info.stamp_ns for _, info in ros2]


def copy_with_storage_identifier(source, destination, value: str | None):
    shutil.copytree(source, destination)
    for item in destination.iterdir():
        item.chmod(0o644)
    text = (destination / "metadata.yaml").read_text()
    line = "storage_identifier: sqlite3"
    assert line in text
    replacement = "" if value is None else f"storage_identifier: {value!r}"
    (destination / "metadata.yaml").write_text(text.replace(line, replacement))
    return destination


@pytest.mark.parametrize("value", ["", None], ids=["empty", "absent"])
def test_a_bag_without_storage_identifier_is_read_by_its_file_suffix(tmp_path, value):
    source = peer_bag("event_camera_py/test_events_1")
    bag = copy_with_storage_identifier(source, tmp_path / "bag", value)
    assert bags.ros2_storage_identifier(bag) == ("sqlite3", False)
    events = Events.concatenate(e for e, _ in bags.iter_bag_events(bag))
    assert events.equals(Events.concatenate(e for e, _ in bags.iter_bag_events(source)))
    # a storage file of an unknown kind: one line naming the problem
    (bag / "test_events_1.db3").rename(bag / "test_events_1.xyz")
    text = (bag / "metadata.yaml").read_text().replace("test_events_1.db3", "test_events_1.xyz")
    (bag / "metadata.yaml").write_text(text)
    with pytest.raises(BagError, match="names no storage_identifier .*expected .mcap or .db3"):
        list(bags.iter_bag_events(bag))


@pytest.mark.parametrize("relative", ["event_camera_py/test_events_1.bag", "event_camera_codecs/test_data_mono_cd"],
                         ids=["ROS 1 EventPacket", "legacy event_array_msgs"])
def test_replay_sends_these_bags_as_ros2_event_packets(relative):
    """What focus-ros replay publishes: CDR EventPacket bytes (a ROS 1 packet converted,
    its event bytes untouched; the legacy type under the EventPacket name it equals) that
    the node's decoder turns into the readers' events; counts and first times for pacing."""
    path = peer_bag(relative)
    source = bags.open_bag_messages(path)
    assert set(source.topics.values()) == {"event_camera_msgs/msg/EventPacket"}
    subscriber = codecs.EventMessageDecoder("event_camera_msgs/EventPacket")
    published, counts, firsts = [], [], []
    for _, msgtype, _, payload, count, first in source.messages():
        events, _ = subscriber(payload)
        published.append(events)
        counts.append(count)
        firsts.append(first)
        assert count == len(events) and first == (int(events.t[0]) if count else -1)
    read = Events.concatenate(e for e, _ in bags.iter_bag_events(path))
    assert Events.concatenate(published).equals(read)


def test_a_cut_ros1_event_packet_bag_gives_back_its_events_up_to_the_cut(tmp_path):
    source = peer_bag("event_camera_py/test_events_1.bag")
    cut = tmp_path / "cut.bag"
    cut.write_bytes(source.read_bytes()[:len(source.read_bytes()) // 2])
    received = []
    with pytest.raises(BagError, match="damaged ROS 1 bag .* event messages record by record"):
        for events, _ in bags.iter_bag_events(cut):
            received.append(events)
    whole = Events.concatenate(e for e, _ in bags.iter_bag_events(source))
    got = Events.concatenate(received)
    assert 0.3 * len(whole) < len(got) < len(whole)
    assert got.equals(whole[:len(got)])  # the same ROS time mapping, message for message


def test_a_storage_file_given_for_its_bag_folder_is_a_one_line_error(capsys):
    from focus_ros.cli import main

    storage_file = peer_bag("event_camera_py/test_events_1") / "test_events_1.db3"
    assert main(["info", str(storage_file)]) == 1
    error = capsys.readouterr().err.strip()
    assert "storage file; give the bag folder" in error and "\n" not in error
    with pytest.raises(BagError, match="give the bag folder"):
        bags.bag_version(storage_file)

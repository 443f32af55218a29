"""Replay a ROS 1 or ROS 2 bag onto ROS 2 topics (events as raw bytes, no conversion step)."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("bag", help="ROS 1 .bag file or ROS 2 bag folder (sqlite3 or mcap)")
    pace = parser.add_mutually_exclusive_group()
    pace.add_argument("--rate", type=float, default=1.0, help="rate factor: 1 = real time (default), 2 = twice as fast")
    pace.add_argument("--paced", action="store_true",
                      help="as fast as the estimator consumes: wait for its estimates on --pace-topic")
    parser.add_argument("--pace-topic", default="/angular_velocity", help="TwistStamped topic to pace on (--paced)")
    parser.add_argument("--pace-lead-events", type=int, default=60000,
                        help="--paced: events published ahead of the last estimate (>= half a window + stride)")
    parser.add_argument("--pace-lead-s", type=float, default=0.25,
                        help="--paced: or this much event time (s) ahead of the last estimate, whichever allows "
                             "more (the angular velocity node's auto windows last at most 0.1 s)")
    parser.add_argument("--topics", nargs="*", default=None, help="topics to play (default: all known types)")
    parser.add_argument("--wait-for-subscribers", type=float, default=5.0, metavar="S",
                        help="wait up to S seconds for a subscriber to the events before playing")


def run(args) -> int:
    from focus_ros.ros.replay_node import replay_bag  # the ROS layer: rclpy is loaded only here

    messages, events = replay_bag(args.bag, 0.0 if args.paced else args.rate, args.pace_topic,
                                  args.pace_lead_events, args.wait_for_subscribers, args.topics, args.pace_lead_s)
    print(f"replayed {messages} messages, {events} events from {args.bag}")
    return 0

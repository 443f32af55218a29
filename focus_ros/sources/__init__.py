"""Where events come from, and their ground truth: the Event Camera Dataset's text folders
(``ecd``), ROS 1 and ROS 2 bags (``bags``, with ``ros1_salvage`` for a ROS 1 bag cut short), and
the event-camera simulator (``simulator`` over ``scenes``, ``trajectories`` and its named
``presets``). Each format's reader/writer owns its own form of depth ground truth
(``depth_maps.DepthGroundTruth`` is the one in-memory form); ``sequence`` is the one entry point
for "a folder or a bag"; ``summary`` says what a sequence holds (``focus-ros info``);
``recording`` is the in-memory result of reading one whole.
"""

__all__ = ["bags", "depth_maps", "ecd", "errors", "recording", "presets", "ros1_salvage", "scenes", "sequence",
           "simulator", "summary", "trajectories"]

"""Each task's loop, once: what turns a stream of events (and poses) into the task's outputs.

A pipeline sits between the estimators (one window or keyframe -> one estimate) and whoever feeds
it: the ROS nodes (messages in, topics out), the command line (a sequence in, files out) and the
benchmarks. It owns what happens between estimates: how windows or keyframes are cut, what an
estimate feeds back into the next one, and what is accumulated (the fused depth map). It is
free of rclpy and of threads: a node runs its estimator in a process of its own
(focus_ros.runtime) and hands each result back to the pipeline.

    angular_velocity   windows sized by the motion, thinned to a budget; estimate -> next window
    depth              pose gating, keyframes by parallax, joining, estimation, fusion, scene depth
    optical_flow       windows (N events or a duration), thinned to the estimator's bound; the estimator
                       sizes them by the motion and warm-starts (its feedback travels with it)
"""

from focus_ros.pipelines.angular_velocity import (AngularVelocityPipeline, Outcome, PipelineCounts, WindowJob,
                                                  WindowSettings)
from focus_ros.pipelines.depth import DepthPipeline, DepthPipelineSettings, KeyframeJob, KeyframeSelector
from focus_ros.pipelines.optical_flow import FlowCounts, FlowWindowSettings, OpticalFlowPipeline

__all__ = ["AngularVelocityPipeline", "Outcome", "PipelineCounts", "WindowJob", "WindowSettings",
           "FlowCounts", "FlowWindowSettings", "OpticalFlowPipeline",
           "DepthPipeline", "DepthPipelineSettings", "KeyframeJob", "KeyframeSelector"]

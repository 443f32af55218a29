"""Estimators: one window of events in, one motion estimate out (used by the ROS nodes
and the command line alike)."""

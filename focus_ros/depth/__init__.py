"""Depth from events and known poses: the DSI engine (dsi), depth from focus (focus),
semi-dense selection (semidense), PLY point clouds (ply), pictures (pictures).
The estimator tying them together is focus_ros.estimators.depth."""

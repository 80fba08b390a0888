"""Mooncake-SG core: everything that is not ROS, grouped by responsibility.

- ``common``: parameter schemas (one per node), the robot description, status levels
- ``cache``: the representation cache (protocol, in-process and shared-memory backends)
- ``serving``: the frame encoder and the action ticker, image checks, latency statistics
- ``models``: the world and action experts, manifests
- ``control``: the clamping gate, command tracking, joint-state checks, the safety monitor
- ``planning``: plans, the rule and LLM planners, subtask embeddings
- ``agent``: the robot agent's task cycle

Never imports rclpy, ROS messages, MuJoCo, the simulator or the training code
(``test_layering`` enforces it): the nodes that serve models depend on this alone.
"""

"""The simulated robot, without ROS: the MuJoCo tabletop and its scripted expert.

``tabletop`` is the arm, the objects and the camera, with joint_trajectory_controller
command semantics; ``scripted_expert`` a state-feedback pick-and-place law (the
demonstrator); ``synthetic`` a deterministic camera and joint-state source for tests
and benchmarks. May import ``wam_core`` and MuJoCo; never rclpy.
"""

"""What stands between an action and the robot, without ROS.

``limits`` is the clamping gate (position, velocity, acceleration; reject whole),
``command_tracker`` the command the robot is following (the gate's baseline),
``joint_state`` validates incoming joint states, ``safety`` decides when the robot
must stop, ``resample`` puts a chunk trained at another period onto the control
period. May import numpy and ``wam_core.common``.
"""

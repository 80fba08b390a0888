"""The robot agent's task cycle (IDLE -> PERCEIVE -> PLAN -> ACT -> OBSERVE), without ROS.

``task_cycle`` is a state machine driven by facts the agent node feeds it. May import
``wam_core.common`` and the standard library.
"""

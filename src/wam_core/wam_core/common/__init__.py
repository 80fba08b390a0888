"""What every layer shares: parameter schemas, the robot description, status levels.

``params`` is the schema machinery (typed, ranged, described parameters, read from a
ROS 2 parameter file without ROS); ``config`` holds one schema per node;
``check_config`` the rules across nodes (``python -m wam_core.common.check_config``); ``robot``
the robot description (joint names, limits, kinematic chain) read from the URDF in
``description/``; ``status`` the diagnostic levels; ``paths`` how relative paths
resolve; ``process`` how child processes die with their parent. May import the
standard library, PyYAML and urdf_parser_py (for the URDF) only.
"""

"""What every layer shares: parameter schemas, the robot description, status levels.

``params`` is the schema machinery (typed, ranged, described parameters, read from a
ROS 2 parameter file without ROS); ``config`` holds one schema per node; ``robot``
the joint names and limits; ``status`` the diagnostic levels; ``paths`` how relative
paths resolve. May import the standard library and PyYAML only.
"""

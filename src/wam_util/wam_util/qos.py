"""The QoS profiles the stack uses, each defined once.

- ``SENSOR``: camera frames and joint states (best effort, keep the newest few), as
  ROS drivers publish them;
- ``NEWEST_FRAME``: the world expert's camera subscription, depth 1: only the newest
  frame is worth encoding;
- ``LATCHED``: state that a late joiner must still get (the safety stop, the active
  subtask): reliable, transient local, depth 1;
- ``EVENTS``: everything else (chunks, descriptors, statuses): reliable, depth 10.
"""

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

SENSOR = qos_profile_sensor_data
NEWEST_FRAME = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=qos_profile_sensor_data.reliability,
    durability=qos_profile_sensor_data.durability,
)
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
EVENTS = 10

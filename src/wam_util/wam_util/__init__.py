"""rclpy glue shared by the Mooncake-SG nodes (the role nav2_util plays in Nav2).

``params`` declares a node's schema as described ROS parameters; ``convert`` turns
core values into messages and back; ``qos`` defines each QoS profile once;
``diagnostics`` publishes /diagnostics; ``status`` the typed status messages and their
diagnostics key/values; ``executors`` the executor and process entry points. May
import ``wam_core`` and rclpy; holds no serving logic.
"""

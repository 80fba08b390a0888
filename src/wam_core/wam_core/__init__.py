"""Mooncake-SG core: everything that is not ROS. Never import rclpy here."""

"""rclpy glue shared by the Mooncake-SG nodes (the role nav2_util plays in Nav2)."""

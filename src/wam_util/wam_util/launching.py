"""launch_ros helpers shared by the launch files (launch/*.launch.py).

launch and launch_ros are part of every ROS 2 install but not on PyPI, so only the
launch files import this module; nothing in the stack or its tests does.
"""

from __future__ import annotations


def managed_node(package: str, executable: str, name: str, params, namespace: str = ''):
    """A lifecycle node that launch drives to active: configure once it is up, activate
    once its configure reached inactive (what nav2's lifecycle_manager does). Only that
    transition: an operator's ``ros2 lifecycle set ... deactivate`` (and the node's own
    deactivate on its way out) also ends in inactive and must stay there, not be
    re-activated by launch. The node's own ``autostart`` parameter must be false."""
    import launch.actions
    import launch.events
    import launch_ros.actions
    import launch_ros.event_handlers
    import launch_ros.events.lifecycle
    import lifecycle_msgs.msg

    node = launch_ros.actions.LifecycleNode(
        package=package,
        executable=executable,
        name=name,
        namespace=namespace,
        output='screen',
        parameters=params,
    )

    def transition(transition_id):
        return launch.actions.EmitEvent(
            event=launch_ros.events.lifecycle.ChangeState(
                lifecycle_node_matcher=launch.events.matches_action(node),
                transition_id=transition_id,
            )
        )

    activate = launch.actions.RegisterEventHandler(
        launch_ros.event_handlers.OnStateTransition(
            target_lifecycle_node=node,
            start_state='configuring',
            goal_state='inactive',
            entities=[transition(lifecycle_msgs.msg.Transition.TRANSITION_ACTIVATE)],
        )
    )
    return [node, activate, transition(lifecycle_msgs.msg.Transition.TRANSITION_CONFIGURE)]

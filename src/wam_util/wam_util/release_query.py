"""Asking another expert node which release it serves (its ``switch_release`` status).

A restarted node comes back with the release its parameters name; the node that kept
running knows the release the robot was switched to since. The world expert asks each
robot's action expert, an action-expert instance the peer that drives its robot.
"""

from __future__ import annotations

from collections.abc import Callable

from wam_interfaces.srv import SwitchRelease


def ask_release(
    client, on_answer: Callable[[SwitchRelease.Response | None], None], robot: str | None = None
) -> bool:
    """Send a status request on ``client`` if its service is there (False: not sent);
    ``robot``: of a world expert, the release it encodes that robot with.
    ``on_answer`` runs on the executor with the response, or None when none came (the
    node went away meanwhile: the caller asks again later)."""
    if not client.service_is_ready():
        return False

    def done(future) -> None:
        try:
            res = future.result()
        except Exception:  # the service went away: no answer
            res = None
        on_answer(res)

    req = SwitchRelease.Request(phase='status', robots=[] if robot is None else [robot])
    client.call_async(req).add_done_callback(done)
    return True

"""Parameter files checked as a whole: each node's schema, and what must hold across nodes.

    python -m wam_core.common.check_config config/wam.yaml [config/fleet.yaml ...]

Each node reads only its own parameters, so a rule that ties two nodes together holds
nowhere unless it is checked where both values are known: here, which the bring-ups
(``robot_agent.stack``, ``robot_agent.fleet``) and the launch files run before starting
anything, and a user runs on a parameter file before deploying it. The rules:

- the harness brakes after ``safety.chunk_hold_s`` without a chunk, and the action expert
  stays silent for up to ``degrade.max_open_loop_s`` while the robot runs its last chunk:
  the first must exceed the second, or every open-loop spell would end in the harness's
  braking hold;
- both experts use the same representation cache (backend, TTL, segment name);
- the action expert and the harness share the control period and the robot's joints.

Each file's node blocks are checked against the node schemas too (an unknown key in a
node's own block is refused, as at run time). Exit 1 with one line per problem.
"""

from __future__ import annotations

import sys

from .config import ActionExpertParams, HarnessParams, WorldExpertParams
from .params import ConfigError, load_params


def cross_node_problems(paths: list[str]) -> list[str]:
    """Every problem of these parameter files (in the order rcl reads them), as lines."""
    try:
        world = load_params(paths, 'world_expert', WorldExpertParams)
        action = load_params(paths, 'action_expert', ActionExpertParams)
        harness = load_params(paths, 'harness', HarnessParams)
    except ConfigError as exc:
        return [str(exc)]
    out = []
    hold, open_loop = harness.safety.chunk_hold_s, action.degrade.max_open_loop_s
    if hold <= open_loop:
        out.append(
            f'harness safety.chunk_hold_s ({hold:g} s) must exceed action_expert '
            f'degrade.max_open_loop_s ({open_loop:g} s): the harness would brake the robot '
            'during every open-loop spell'
        )
    for name in ('backend', 'ttl_ms', 'shm_name'):
        w, a = getattr(world.repr_cache, name), getattr(action.repr_cache, name)
        if w != a:
            out.append(
                f'repr_cache.{name} differs: world_expert {w!r}, action_expert {a!r} '
                '(the experts must share one cache)'
            )
    if action.control.period_s != harness.control.period_s:
        out.append(
            f'control.period_s differs: action_expert {action.control.period_s:g}, '
            f'harness {harness.control.period_s:g}'
        )
    for node, cfg in (('action_expert', action), ('world_expert', world)):
        if list(cfg.robot.joint_names) != list(harness.robot.joint_names):
            out.append(
                f'robot.joint_names differ: {node} {list(cfg.robot.joint_names)}, '
                f'harness {list(harness.robot.joint_names)}'
            )
    return out


def require_consistent(paths: list[str]) -> None:
    """ConfigError with every problem, for a bring-up to refuse to start."""
    problems = cross_node_problems(paths)
    if problems:
        raise ConfigError(f'{", ".join(paths)}: ' + '; '.join(problems))


def main(argv=None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths or any(p.startswith('-') for p in paths):
        print(__doc__)
        return 2
    problems = cross_node_problems(paths)
    for p in problems:
        print(f'error: {p}')
    if not problems:
        print(f'{", ".join(paths)}: consistent')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())

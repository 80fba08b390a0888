"""Model releases from the command line: the registry, and switches on a running stack.

    python -m robot_agent.releases register NAME --world DIR --action DIR --reason WHY
    python -m robot_agent.releases list [--state live]
    python -m robot_agent.releases show NAME
    python -m robot_agent.releases history [NAME]
    python -m robot_agent.releases promote NAME --reason WHY   [--fleet robot1,robot2]
    python -m robot_agent.releases canary NAME --robots robot1 --reason WHY
                                  [--fleet robot1,robot2] [--window 30]
    python -m robot_agent.releases rollback --reason WHY        [--fleet robot1,robot2]

``--db`` (default $WAM_RELEASES_DB, else releases/releases.db in the workspace) is the
registry; ``--json`` prints the result as JSON. register, list, show and history touch
only the registry. promote, canary and rollback switch the running stack (``--fleet``:
its robots' namespaces; without it a lone robot in the root namespace) through the
experts' switch_release services, and record every state change in the registry's
audit. A release registered for another robot description than the stack's
(``--config``'s robot.description_file) is refused. Exit status: 0 done, 1 refused or
failed (the reason on stderr), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from wam_core.common.config import ActionExpertParams
from wam_core.common.params import ConfigError, load_params
from wam_core.common.paths import default_config
from wam_core.releases.objectives import Objectives
from wam_core.releases.registry import (
    CANARY,
    LIVE,
    ROLLED_BACK,
    Registry,
    RegistryError,
    default_db_path,
)


def default_db() -> str:
    return default_db_path()


def robot_of_config(config: str):
    return load_params(config, 'action_expert', ActionExpertParams).robot.description()


def release_overlay(name: str, db: str | None = None, out_dir: str | None = None) -> str:
    """A parameter file that points both experts at a registered release (after
    config/wam.yaml): what the bring-up and the launch files pass for ``release:=NAME``."""
    with Registry(db or default_db()) as reg:
        rel = reg.get(name)
    out_dir = out_dir or os.path.join(os.path.dirname(db or default_db()), 'overlays')
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f'{name}.yaml')
    text = (
        f'# generated for release {name} from {db or default_db()}\n'
        '/**/world_expert:\n  ros__parameters:\n'
        f'    model_dir: {json.dumps(rel.world_dir)}\n    release: {json.dumps(name)}\n'
        f'    releases_db: {json.dumps(os.path.abspath(db or default_db()))}\n'
        '/**/action_expert:\n  ros__parameters:\n'
        f'    model_dir: {json.dumps(rel.action_dir)}\n    release: {json.dumps(name)}\n'
        f'    releases_db: {json.dumps(os.path.abspath(db or default_db()))}\n'
    )
    with open(path, 'w', encoding='utf-8') as fh:
        fh.write(text)
    return path


def overlay_for_config(name: str, config: str, db: str | None = None) -> str:
    """``release_overlay`` for a stack configured by ``config``: RegistryError if the
    release was registered for another robot description than that stack's."""
    with Registry(db or default_db()) as reg:
        reg.check_robot(name, robot_of_config(config))
    return release_overlay(name, db)


def _print(obj, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, indent=2, default=str))
        return
    if isinstance(obj, list):
        for row in obj:
            print(_line(row))
    else:
        for k, v in obj.items():
            if k != 'conformance':
                print(f'{k:>24}: {v}')
        for c in obj.get('conformance', []):
            print(f'{"check " + c["name"]:>24}: {"pass" if c["passed"] else "FAIL"} {c["figure"]}')


def _line(row: dict) -> str:
    if 'to_state' in row:  # an audit row
        import time

        at = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(row['at']))
        robots = f' on {",".join(row["robots"])}' if row['robots'] else ''
        return (
            f'{at}  {row["release"]:<20} {row["from_state"] or "-":>11} -> '
            f'{row["to_state"]:<11}{robots}  by {row["actor"]}: {row["reason"]}'
        )
    robots = f' on {",".join(row["robots"])}' if row['robots'] else ''
    return (
        f'{row["name"]:<20} {row["state"]:<11}{robots}  world {row["world_version"]}  '
        f'action {row["action_version"]}  ({row["robot_name"]})'
    )


def _manager(args):
    import rclpy

    from .release_manager import ReleaseManager

    rclpy.init()
    fleet = [r for r in (args.fleet or '').split(',') if r] or ['']
    return ReleaseManager(fleet, log=lambda m: print(m, file=sys.stderr))


def _run_switch(args, reg: Registry) -> dict:
    import rclpy

    robot = robot_of_config(args.config)
    mgr = _manager(args)
    try:
        if args.command == 'rollback':
            live = reg.live()
            if live is None:
                raise RegistryError('no release is live: nothing to roll back')
            target = reg.previous_live(live.name)
            if target is None:
                raise RegistryError(f'no release was live before {live.name}')
            reg.check_robot(target.name, robot)
            res = mgr.switch(target)
            mgr.confirm(target.name)
            reg.transition(live.name, ROLLED_BACK, args.reason, detail=_figures(res))
            reg.transition(target.name, LIVE, f'rollback of {live.name}: {args.reason}')
            return {'rolled_back': live.name, 'live': target.name, **_figures(res)}
        rel = reg.check_robot(args.name, robot)
        if args.command == 'promote':
            res = mgr.switch(rel)
            mgr.confirm(rel.name)
            reg.transition(rel.name, LIVE, args.reason, detail=_figures(res))
            return {'live': rel.name, **_figures(res)}
        robots = [r for r in args.robots.split(',') if r]
        outside = [r for r in robots if r not in mgr.robots]
        if not robots or outside:
            raise RegistryError(
                f'--robots {args.robots!r}: name robots of --fleet {args.fleet!r} '
                f'({", ".join(outside) or "none named"} not in it)'
            )
        live = reg.live()
        if live is None:
            raise RegistryError('a canary needs a live release to return to: promote one first')
        reg.transition(rel.name, CANARY, args.reason, robots=robots)
        out = mgr.canary(rel, live, robots, args.window, Objectives())
        detail = {
            'reasons': out.reasons,
            'windows': {r: w.__dict__ for r, w in out.windows.items()},
            'auto_rollback_s': out.auto_rollback_s,
        }
        if out.promoted:
            reg.transition(rel.name, LIVE, f'canary held for {out.watched_s:.0f} s', detail=detail)
        else:
            reg.transition(
                rel.name, ROLLED_BACK, '; '.join(out.reasons), robots=robots, detail=detail
            )
        return {'release': rel.name, 'promoted': out.promoted, **detail}
    finally:
        mgr.close()
        rclpy.try_shutdown()


def _figures(res) -> dict:
    return {
        'load_s': round(res.load_s, 3),
        'switch_ms': {r or 'robot': round(v, 1) for r, v in res.switch_ms.items()},
        'degraded_ticks': {r or 'robot': v for r, v in res.degraded_ticks.items()},
        'peak_rss_mb': res.peak_rss_mb,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog='python -m robot_agent.releases',
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument('--db', default=None, help='the registry (default: %(default)s)')
    ap.add_argument('--json', action='store_true', help='print the result as JSON')
    ap.add_argument('--config', default=default_config(), help='the stack parameter file')
    sub = ap.add_subparsers(dest='command', required=True)
    p = sub.add_parser('register', help='verify and record a world/action pair')
    p.add_argument('name')
    p.add_argument('--world', required=True, help='world-expert model directory')
    p.add_argument('--action', required=True, help='action-expert model directory')
    p.add_argument('--reason', required=True)
    p.add_argument('--robot-description', default=None, help="URDF (default: --config's)")
    p = sub.add_parser('list', help='the releases')
    p.add_argument('--state', default=None)
    sub.add_parser('show', help='one release').add_argument('name')
    sub.add_parser('history', help='the audit').add_argument('name', nargs='?')
    for cmd in ('promote', 'canary', 'rollback'):
        p = sub.add_parser(cmd, help=f'{cmd} on the running stack')
        if cmd != 'rollback':
            p.add_argument('name')
        p.add_argument('--reason', required=True)
        p.add_argument('--fleet', default='', help="the robots' namespaces, comma-separated")
        if cmd == 'canary':
            p.add_argument('--robots', required=True, help='the canary robots')
            p.add_argument('--window', type=float, default=30.0, help='watch window, s')
    args = ap.parse_args(argv)
    db = args.db or default_db()
    try:
        with Registry(db) as reg:
            if args.command == 'register':
                if args.robot_description:
                    from wam_core.common.robot import description_of_file

                    robot = description_of_file(args.robot_description)
                else:
                    robot = robot_of_config(args.config)
                print(f'registering {args.name}: running the conformance kit', file=sys.stderr)
                out = reg.register(
                    args.name, args.world, args.action, robot, args.reason, config=args.config
                ).as_dict()
            elif args.command == 'list':
                out = [r.as_dict() for r in reg.list(args.state)]
            elif args.command == 'show':
                out = reg.get(args.name).as_dict()
            elif args.command == 'history':
                out = [r.as_dict() for r in reg.history(args.name)]
            else:
                out = _run_switch(args, reg)
    except (RegistryError, ConfigError, OSError) as exc:
        print(f'{args.command}: {exc}', file=sys.stderr)
        return 1
    except RuntimeError as exc:  # SwitchError: the stack refused or did not answer
        print(f'{args.command}: {exc}', file=sys.stderr)
        return 1
    _print(out, args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""The conformance kit: is this world/action expert pair fit to serve this robot?

    python -m wam_core.models.check models/world_expert models/action_expert \\
        [--config config/wam.yaml] [--json out.json] [--untimed]

Loads the pair through the registry (as the nodes do) and checks, in order:

- ``manifest``: both directories match their manifests (sha256 of every file);
- ``contract``: both types are registered and their specs add up (:mod:`.contract`);
  the action expert accepts this world expert's version and representation shape;
- ``joints`` / ``period``: the action expert's joints are the robot's, in command order
  (the parameter file's ``robot.joint_names``); a chunk trained at another period than
  the control period is resampled onto it and must keep 3 rows there;
- ``world_outputs``: the declared shape and dtype, finite, on a random, a black and a
  saturated observation;
- ``action_outputs``: [1, H, N], finite, for every one of those representations and joint
  states at zero, random, and at each joint's lower and upper limit;
- ``determinism``: the same inputs give the same outputs, for both experts;
- ``cached_context``: a chunk decoded from a context prepared earlier (and used for
  other states in between) equals prepare-then-decode afresh;
- ``latency``: encode, prepare and decode p50/p99 on this machine, against the
  configured budgets: encode p99 over the world expert's ``timeout_ms`` fails; prepare +
  decode p99 over the action expert's ``timeout_ms`` fails when it decodes on the tick
  (``decode_mode: tick``), and otherwise means it decodes off the tick, a chunk every
  ceil(p99 / period) periods: that fails only past the harness's ``chunk_hold_s``
  (the harness would brake the robot between chunks).

It prints one row per check and exits 1 if any failed (the reason is in the row: a
pair that cannot be loaded fails ``manifest`` or ``contract``), 2 if the parameter file
cannot be read. :func:`run_checks` is the same for a pair already in
memory, so a test can feed it a deliberately broken expert.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..cache.protocol import CacheError, storage_dtype
from ..common.config import ActionExpertParams, HarnessParams, WorldExpertParams
from ..common.params import ConfigError, load_params
from ..common.paths import default_config
from ..control.resample import resampled_horizon
from .contract import (
    ContractError,
    Observation,
    check_action_expert,
    check_pair,
    check_world_expert,
)
from .manifest import ManifestError, verify_manifest
from .precision import resolve_precision
from .registry import load_action_expert, load_world_expert


def _representation(array: np.ndarray, dtype: str, like) -> torch.Tensor:
    """A world expert's host array (bfloat16 as its 16-bit words) as the action expert's
    input [1, ...], as the serving loop hands it over."""
    t = torch.from_numpy(np.ascontiguousarray(array))
    if dtype == 'bfloat16':
        t = t.view(torch.bfloat16)
    return t[None].to(like.device, like.dtype)


@dataclass
class Check:
    name: str
    passed: bool
    figure: str = ''  # what was measured, for the table and the bench report
    reason: str = ''  # why it failed


@dataclass
class Budgets:
    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    period_s: float = 0.02
    encode_ms: float = 40.0
    tick_ms: float = 15.0  # prepare + decode
    world_precision: str = 'fp32'  # as the nodes are configured to load them
    action_precision: str = 'fp32'
    robot: object = None  # the RobotDescription (URDF) the action expert serves
    decode_mode: str = 'auto'  # tick | async | auto (the action expert's)
    chunk_hold_s: float = 0.15  # the harness brakes after this long without a chunk


def budgets_from_config(path: str) -> Budgets:
    world = load_params(path, 'world_expert', WorldExpertParams)
    action = load_params(path, 'action_expert', ActionExpertParams)
    harness = load_params(path, 'harness', HarnessParams)
    names = tuple(action.robot.joint_names)
    return Budgets(
        names,
        np.array([action.joint_limits[n].lower for n in names]),
        np.array([action.joint_limits[n].upper for n in names]),
        action.control.period_s,
        world.timeout_ms,
        action.timeout_ms,
        world.precision,
        action.precision,
        action.robot.description(),
        action.decode_mode,
        harness.safety.chunk_hold_s,
    )


def _observations(world) -> dict[str, Observation]:
    rng = np.random.default_rng(0)
    out = {}
    for label, fill in (('random', None), ('black', 0), ('saturated', 255)):
        views = {}
        for v in world.spec.views:
            shape = (v.height, v.width, 3)
            views[v.name] = (
                rng.integers(0, 256, shape, dtype=np.uint8)
                if fill is None
                else np.full(shape, fill, dtype=np.uint8)
            )
        # a task's text, for a world expert that reads it (the others ignore it)
        out[label] = Observation(views, time.time_ns(), prompt='pick up the red apple')
    return out


def _percentiles(samples_ms: list[float]) -> tuple[float, float]:
    p50, p99 = np.percentile(samples_ms, [50, 99])
    return float(p50), float(p99)


@torch.inference_mode()
def run_checks(world, action, budgets: Budgets, repeats: int = 100) -> list[Check]:
    """Every check after ``manifest`` on a loaded pair; stops early where later checks
    could not run (a broken contract, a wrong shape)."""
    checks: list[Check] = []
    try:
        check_world_expert(world)
        check_action_expert(action)
        check_pair(world, action)
        checks.append(
            Check(
                'contract',
                True,
                f'{world.name} {world.spec.shape} -> {action.name} '
                f'{action.spec.horizon}x{len(action.spec.joint_names)} ({action.spec.output})',
            )
        )
    except ContractError as exc:
        return [Check('contract', False, reason=str(exc))]
    spec = action.spec
    if tuple(spec.joint_names) == tuple(budgets.joint_names):
        checks.append(Check('joints', True, f'{len(spec.joint_names)} joints, robot order'))
    else:
        missing = [n for n in budgets.joint_names if n not in spec.joint_names]
        extra = [n for n in spec.joint_names if n not in budgets.joint_names]
        checks.append(
            Check(
                'joints',
                False,
                reason=f"model joints {list(spec.joint_names)} are not the robot's "
                f'{list(budgets.joint_names)} (missing {missing}, unknown {extra})'
                if missing or extra
                else f'same joints in another order: {list(spec.joint_names)}',
            )
        )
    if abs(spec.period_s - budgets.period_s) <= 1e-6:
        checks.append(Check('period', True, f'{spec.period_s * 1e3:g} ms'))
    else:  # the serving loop resamples the chunk onto the control period
        rows = resampled_horizon(spec.horizon, spec.period_s, budgets.period_s)
        checks.append(
            Check(
                'period',
                rows >= 3,
                f'trained at {spec.period_s * 1e3:g} ms, resampled onto '
                f'{budgets.period_s * 1e3:g} ms ({spec.horizon} -> {rows} rows)',
                ''
                if rows >= 3
                else f'a {spec.horizon}-row chunk at {spec.period_s * 1e3:g} ms is {rows} rows '
                f"at the robot's {budgets.period_s * 1e3:g} ms: a chunk needs 3",
            )
        )
    # world outputs --------------------------------------------------------------------
    observations = _observations(world)
    reps, problems = {}, []
    rep_like = torch.zeros((), dtype=torch.float32)
    for label, obs in observations.items():
        try:
            rep = np.asarray(world.encode(obs))
        except Exception as exc:  # a plug-in's failure is a finding, not a crash
            problems.append(f'{label}: encode raised {type(exc).__name__}: {exc}')
            continue
        try:
            stored = storage_dtype(world.spec.dtype)
        except CacheError as exc:
            problems.append(str(exc))
            break
        if rep.shape != tuple(world.spec.shape):
            problems.append(f'{label}: shape {rep.shape}, declared {tuple(world.spec.shape)}')
        elif rep.dtype != stored:
            problems.append(f'{label}: dtype {rep.dtype}, declared {world.spec.dtype}')
        elif not torch.isfinite(_representation(rep, world.spec.dtype, rep_like)).all():
            problems.append(f'{label}: non-finite values')
        else:
            reps[label] = rep
    checks.append(
        Check(
            'world_outputs',
            not problems,
            f'{len(observations)} observations, shape {tuple(world.spec.shape)}',
            '; '.join(problems),
        )
    )
    if problems:
        return checks
    # action outputs -------------------------------------------------------------------
    n = len(spec.joint_names)
    rng = np.random.default_rng(1)
    mid = (budgets.lower + budgets.upper) / 2 if len(budgets.lower) == n else np.zeros(n)
    states = {'zero': np.zeros(n), 'random': mid + rng.normal(0, 0.2, n)}
    if len(budgets.lower) == n:
        states['lower limits'] = budgets.lower
        states['upper limits'] = budgets.upper
    cond = torch.as_tensor(
        rng.normal(0, 1, (1, spec.conditioning_dim)), dtype=action.dtype, device=action.device
    )

    def tensor(x):
        return torch.as_tensor(np.asarray(x)[None], dtype=action.dtype, device=action.device)

    def rep_tensor(label):
        return _representation(reps[label], world.spec.dtype, action_like)

    action_like = torch.zeros((), dtype=action.dtype, device=action.device)

    contexts, problems, outputs = {}, [], {}
    for label in reps:
        try:
            contexts[label] = action.prepare(rep_tensor(label))
        except Exception as exc:
            problems.append(f'prepare({label}) raised {type(exc).__name__}: {exc}')
            continue
        for s_label, q in states.items():
            try:
                out = action.decode(contexts[label], tensor(q), cond)
            except Exception as exc:
                problems.append(f'decode({label}, {s_label}) raised {type(exc).__name__}: {exc}')
                continue
            out = out.float().cpu().numpy()
            if out.shape != (1, spec.horizon, n):
                declared = (1, spec.horizon, n)
                problems.append(f'{label}/{s_label}: chunk shape {out.shape}, declared {declared}')
            elif not np.all(np.isfinite(out)):
                problems.append(f'{label}/{s_label}: {int(np.sum(~np.isfinite(out)))} NaN/inf')
            else:
                outputs[(label, s_label)] = out
    checks.append(
        Check(
            'action_outputs',
            not problems,
            f'{len(reps)} representations x {len(states)} joint states',
            '; '.join(problems[:3]),
        )
    )
    if problems:
        return checks
    # determinism ----------------------------------------------------------------------
    diff_w = max(
        float(np.max(np.abs(np.asarray(world.encode(o)).astype(np.float64) - reps[k])))
        for k, o in observations.items()
    )
    diff_a = max(
        float(
            np.max(
                np.abs(
                    action.decode(action.prepare(rep_tensor(r)), tensor(states[s]), cond)
                    .float()
                    .cpu()
                    .numpy()
                    - out
                )
            )
        )
        for (r, s), out in outputs.items()
    )
    ok = diff_w == 0.0 and diff_a == 0.0
    checks.append(
        Check(
            'determinism',
            ok,
            f'max diff world {diff_w:.2e}, action {diff_a:.2e}',
            '' if ok else 'the same inputs gave different outputs',
        )
    )
    # a cached context against a fresh one ---------------------------------------------
    # (contexts[...] were prepared first and used for every state since)
    diff = max(
        float(
            np.max(
                np.abs(
                    action.decode(contexts[r], tensor(states[s]), cond).float().cpu().numpy() - out
                )
            )
        )
        for (r, s), out in outputs.items()
    )
    checks.append(
        Check(
            'cached_context',
            diff == 0.0,
            f'max diff {diff:.2e}',
            '' if diff == 0.0 else 'decoding from a kept context differs from a fresh prepare',
        )
    )
    # latency --------------------------------------------------------------------------
    obs = observations['random']
    world.warmup(10)
    enc, prep, dec = [], [], []
    calls = world.calls
    for _ in range(max(10, repeats // 4)):
        t0 = time.perf_counter()
        world.encode(obs)
        enc.append((time.perf_counter() - t0) * 1e3)
    world.calls = calls  # the kit's encodes are not observations served
    rep_t, q_t = rep_tensor('random'), tensor(states['random'])
    for _ in range(repeats):
        t0 = time.perf_counter()
        ctx = action.prepare(rep_t)
        t1 = time.perf_counter()
        action.decode(ctx, q_t, cond)
        t2 = time.perf_counter()
        prep.append((t1 - t0) * 1e3)
        dec.append((t2 - t1) * 1e3)
    e50, e99 = _percentiles(enc)
    p50, p99 = _percentiles(prep)
    d50, d99 = _percentiles(dec)
    tick99 = float(np.percentile(np.add(prep, dec), 99))
    reasons = []
    if e99 > budgets.encode_ms:
        reasons.append(f'encode p99 {e99:.1f} ms over the {budgets.encode_ms:g} ms budget')
    served = ''
    if tick99 > budgets.tick_ms:
        if budgets.decode_mode == 'tick':
            reasons.append(
                f'prepare+decode p99 {tick99:.1f} ms over the {budgets.tick_ms:g} ms budget '
                '(decode_mode tick)'
            )
        elif tick99 > budgets.chunk_hold_s * 1e3:
            reasons.append(
                f'prepare+decode p99 {tick99:.1f} ms: decoded off the tick, chunks would come '
                f"slower than the harness's {budgets.chunk_hold_s * 1e3:g} ms chunk_hold_s"
            )
        else:
            periods = math.ceil(tick99 / (budgets.period_s * 1e3))
            served = (
                f'; off the tick (over the {budgets.tick_ms:g} ms tick budget): a chunk every '
                f'{periods} periods, {1 / (periods * budgets.period_s):.0f} Hz'
            )
    checks.append(
        Check(
            'latency',
            not reasons,
            f'encode {e50:.2f}/{e99:.2f}, prepare {p50:.2f}/{p99:.2f}, '
            f'decode {d50:.2f}/{d99:.2f} ms p50/p99{served}',
            '; '.join(reasons),
        )
    )
    return checks


def check_dirs(world_dir: str, action_dir: str, config: str | None = None) -> list[Check]:
    """The whole kit on two model directories."""
    budgets = budgets_from_config(config or default_config())
    try:
        for d in (world_dir, action_dir):
            verify_manifest(d)
    except ManifestError as exc:
        return [Check('manifest', False, reason=str(exc))]
    checks = [Check('manifest', True, 'every file matches its sha256')]
    try:
        world = load_world_expert(world_dir, budgets.world_precision)
        action = load_action_expert(
            action_dir, resolve_precision(budgets.action_precision), robot=budgets.robot
        )
    except (ManifestError, ContractError) as exc:
        return checks + [Check('contract', False, reason=str(exc))]
    return checks + run_checks(world, action, budgets)


# The one check whose verdict depends on how busy this machine is while it runs.
TIMED = ('latency',)


def untimed(checks: list[Check]) -> list[Check]:
    """The checks whose verdict is the pair's alone (all but the timed ones): what a test
    suite on a shared, noisy machine can require, while the latency figures are judged
    where they are measured on purpose (the kit's own run, the benchmarks)."""
    return [c for c in checks if c.name not in TIMED]


def timed_ran(checks: list[Check]) -> bool:
    """Whether the timed checks ran and measured (their figures are set whichever way
    their verdict went)."""
    timed = [c for c in checks if c.name in TIMED]
    return bool(timed) and all(c.figure for c in timed)


def table(checks: list[Check]) -> str:
    rows = [('check', 'result', 'figure / reason')]
    for c in checks:
        rows.append((c.name, 'pass' if c.passed else 'FAIL', c.figure if c.passed else c.reason))
    w0 = max(len(r[0]) for r in rows)
    return '\n'.join(f'{a:<{w0}}  {b:<6}  {c}' for a, b, c in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('world_dir')
    ap.add_argument('action_dir')
    ap.add_argument('--config', default=None, help='parameter file (default: config/wam.yaml)')
    ap.add_argument('--json', default=None, help='also write the results here')
    ap.add_argument(
        '--untimed',
        action='store_true',
        help='judge every check but latency, whose figures are still printed (a shared, '
        'noisy machine such as CI: its verdict would be the machine load at the time)',
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # as the nodes run (num_threads: 1): the budgets are theirs
    try:
        checks = check_dirs(args.world_dir, args.action_dir, args.config)
    except (ConfigError, OSError) as exc:
        print(f'cannot run the conformance kit: {exc}', file=sys.stderr)
        return 2
    print(table(checks))
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as fh:
            json.dump([asdict(c) for c in checks], fh, indent=2)
    judged = untimed(checks) if args.untimed else checks
    failed = [c.name for c in judged if not c.passed]
    verdict = 'FAILED (' + ', '.join(failed) + ')' if failed else 'passed'
    print(f'conformance: {verdict}' + (' (latency not judged)' if args.untimed else ''))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

"""DAgger: the scripted expert labels the states the trained policy visits.

    python -m wam_learning.dagger --models models --out datasets/pick_place_dagger --episodes 48

Each episode is driven by the learned policy (both experts called in-process, as in
`make eval`'s direct mode) in stretches of one second; with probability ``beta`` a
stretch is driven by the expert instead, so that later phases are reached too. Every
tick records the expert's chunk for the state the robot is actually in. Behaviour
cloning on expert states alone never shows the policy how to recover from its own
mistakes (a gripper closed too early, a missed grasp); training on both datasets does.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

from .dataset import record

DAGGER_FIRST_SEED = 10_000  # neither the demonstrations (0..) nor the evaluation (5000..)
STRETCH_TICKS = 50


class PolicyDriver:
    """``driver(sim)`` for ``scripted_expert.run_episode``: the policy's chunk, or None
    (the expert's) during a stretch handed to the expert."""

    def __init__(self, policy, seed: int, beta: float, render_every: int = 2):
        self.policy = policy
        self.rng = np.random.default_rng(seed + 104729)
        self.beta, self.render_every = beta, render_every
        self.tick, self.scene, self.expert_stretch = 0, None, False

    @torch.inference_mode()
    def __call__(self, sim):
        tick = self.tick
        self.tick += 1
        if tick % STRETCH_TICKS == 0:
            self.expert_stretch = tick > 0 and self.rng.random() < self.beta
        if tick % self.render_every == 0 or self.scene is None:
            self.scene = self.policy.encode(self.policy.observe(sim))
        if self.expert_stretch:
            return None
        return self.policy.decode(self.scene, sim.joint_positions(), tick * self.policy.period_s)


def main(argv=None) -> int:
    from .evaluate import Policy

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        '--models',
        default='models',
        help='the trained world_expert/ and action_expert/ to roll out',
    )
    ap.add_argument('--out', default='datasets/pick_place_dagger')
    ap.add_argument('--episodes', type=int, default=48)
    ap.add_argument('--first-seed', type=int, default=DAGGER_FIRST_SEED)
    ap.add_argument(
        '--beta', type=float, default=0.3, help="chance that a one-second stretch is the expert's"
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 4)))
    policy = Policy(
        os.path.join(args.models, 'world_expert'),
        os.path.join(args.models, 'action_expert'),
        precision='fp32',
    )
    m = record(
        args.out,
        args.episodes,
        args.first_seed,
        noise=0.0,
        keep_failed=True,
        kind='wam-pick-place-dagger',
        driver_factory=lambda seed: PolicyDriver(policy, seed, args.beta),
    )
    ok = len(m['episodes']) - len(m['failed_seeds'])
    print(
        f'dagger {args.out}: {len(m["episodes"])} on-policy episodes ({ok} reached the goal), '
        f'{sum(e["ticks"] for e in m["episodes"])} labelled ticks, {m["seconds_to_record"]} s'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())

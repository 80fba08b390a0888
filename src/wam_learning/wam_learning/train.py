"""Behaviour cloning: train the world expert (ViT) and the action expert from demonstrations.

    python -m wam_learning.train --data datasets/pick_place --out models [--steps 2600] [--seed 0]

Two stages, each training the part of the action expert that sits on its side of the
serving cache (see ``action_expert``):

1. World expert + object head (``--steps``). On demonstration observations and on
   freshly rendered random scenes, every camera view through the one ViT, the views'
   CLS tokens, through the action expert's object head, regress the apple and fridge
   positions (L1). A training-only patch head
   adds dense labels -- every patch token of every view says whether the apple's (the
   fridge's) centre falls in it and where (cross-entropy over patches plus an offset L1,
   as in CenterNet; a centre outside the moving wrist camera's image adds nothing) --
   which locate a 5-pixel cube far faster than the global regression alone.
   Random scenes teach where things are rather than which of the few hundred
   demonstration scenes this is, which a ViT otherwise memorises.
2. Action expert (``--action-steps``). An L1 over the whole chunk (as in ACT) against
   the scripted expert's chunk on every demonstration tick, plus the random scenes'
   states labelled by the expert. The object inputs are the trained world expert's
   estimates from the tick's latest frame (or one a few ticks older, as in serving,
   where a representation serves the ticks after its frame) half the time, and the
   true positions with 4 mm noise otherwise, so the policy is cloned on the errors it
   will see. The subtask input is the embedding of the expert's current skill half the
   time and of another subtask of the plan (or none) otherwise: the harness advances
   subtasks on a timer, so the policy must not depend on the subtask being exact.

Deterministic given the seed and thread count. Writes both experts with manifests
into ``out`` (replacing the defaults), a reference sample for the load test, the
loss log (CSV) and a loss-curve PNG under ``out/training``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import ViTModel

from wam_core.models.action_expert import ActionExpert, ActionExpertConfig, default_delta_scale
from wam_core.models.default_models import (
    ACTION_NAME,
    ACTION_TYPE,
    PERIOD_S,
    WORLD_NAME,
    WORLD_TYPE,
)
from wam_core.models.manifest import read_manifest, sha256_file, write_manifest
from wam_core.models.world_expert import default_world_config, representation_tokens
from wam_sim.tabletop import JOINT_NAMES, TABLE_Z, camera_pixels

from .dataset import load as load_dataset

DEFAULT_INSTRUCTION = 'put the red apple in the fridge'
GRIPPER_WEIGHT = 10.0  # the gripper moves ~0.04 m where arm joints move ~0.4 rad
AUX_WEIGHT = 0.5
PATCH_WEIGHT = 0.1  # the patch cross-entropy starts at 2 x ln(64) = 8.3
STATE_LAG_TICKS = 4  # a representation serves the ticks up to ~80 ms after its frame


def plan_texts(instruction: str = DEFAULT_INSTRUCTION) -> dict[str, str]:
    from wam_core.planning.rules import RulePlanner

    return {s.skill: s.text() for s in RulePlanner().plan(instruction).subtasks}


def embed_texts(texts: list[str]) -> np.ndarray:
    from wam_core.planning.embedding import SubtaskEmbedder

    emb = SubtaskEmbedder()
    return np.stack([emb.embed(t) for t in texts]).astype(np.float32)


class RandomScenes:
    """Freshly rendered random scenes (objects from a new seed, the arm in a random pose),
    labelled with the object positions and with the scripted expert's chunk for that state.

    The position labels teach the world expert where things are instead of which of the
    few hundred demonstration scenes it is looking at (which it otherwise memorises).
    The chunk labels show the action expert thousands of apple positions instead of the
    demonstrations' few hundred: cloned from those alone, the policy reached 5 cm wide of
    an unseen apple. Half the poses put the TCP around and above the apple (the
    approach and grasp states), half are anywhere near the home pose."""

    def __init__(self, seed: int, views: tuple[str, ...] = ('front',)):
        from wam_sim.scripted_expert import ScriptedExpert
        from wam_sim.tabletop import HOME, TabletopSim

        self.views = tuple(views)
        self.sim = TabletopSim()
        self.expert = ScriptedExpert(self.sim)
        self.home = HOME
        self.rng = np.random.default_rng(seed)
        self.next_seed = 1_000_000 + 10_000 * seed

    def _pose(self, near_apple: bool) -> np.ndarray:
        from wam_sim.scripted_expert import GRASP_Z, solve_ik

        sim, rng = self.sim, self.rng
        q = self.home.copy()
        if near_apple:
            apple = sim.body_position('apple')
            # half within 5 cm (the grasp), half 5-25 cm away and up to 25 cm above (the
            # approach, where the gripper passes over the apple in the camera's view)
            grasp = rng.random() < 0.5
            r, a = (
                rng.uniform(0.0, 0.05) if grasp else rng.uniform(0.05, 0.25),
                rng.uniform(-np.pi, np.pi),
            )
            dz = rng.uniform(0.0, 0.14) if grasp else rng.uniform(0.0, 0.25)
            target = [apple[0] + r * np.cos(a), apple[1] + r * np.sin(a), GRASP_Z + dz]
            yaw = np.arctan2(apple[1], apple[0]) + rng.uniform(-0.3, 0.3)
            # via a point above: from the home pose, a low target can trap the IK in a fold
            q[:6] = solve_ik(sim, [target[0], target[1], GRASP_Z + 0.16], yaw, q)
            q[:6] = solve_ik(sim, target, yaw, q)
            # open or closing; a grip between these near the apple means "holding it"
            q[6] = rng.uniform(0.023, 0.04) if rng.random() < 0.8 else rng.uniform(0.0, 0.008)
        else:
            q[:4] += rng.uniform(-0.6, 0.6, 4)
            q[6] = rng.uniform(0.0, 0.04)
        return q

    def sample(self, n: int):
        """(images [n,V,S,S,3] uint8, positions [n,5], joint states [n,7], chunks [n,H,7],
        phase indices [n], the objects' pixels in the views after the first [n,V-1,2,2])."""
        import mujoco

        from .dataset import PHASES

        images, aux, qs, chunks, phases, view_px = [], [], [], [], [], []
        sim = self.sim
        for i in range(n):
            sim.reset(self.next_seed)
            self.next_seed += 1
            q = self._pose(near_apple=bool(i % 2))
            for a, v in zip(sim._qadr, q, strict=True):
                sim.data.qpos[a] = v
            mujoco.mj_forward(sim.model, sim.data)
            name, chunk = self.expert.act()
            images.append(np.stack([sim.render(v) for v in self.views]))
            if len(self.views) > 1:
                view_px.append(np.stack([sim.object_pixels(v) for v in self.views[1:]]))
            aux.append(
                np.concatenate(
                    [sim.body_position('apple') - [0, 0, TABLE_Z], sim.body_position('fridge')[:2]]
                )
            )
            qs.append(sim.joint_positions())
            chunks.append(chunk)
            phases.append(PHASES.index(name))
        t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
        px = t(np.stack(view_px)) if len(self.views) > 1 else torch.zeros(n, 0, 2, 2)
        return torch.from_numpy(np.stack(images)), t(aux), t(qs), t(chunks), np.array(phases), px


class Batches:
    """Demonstration samples from episodes in memory: observations (every view of a frame)
    with their object positions (world expert), and control ticks with the joint state,
    the expert's chunk, the subtask and the object positions (action expert)."""

    def __init__(
        self,
        episodes: list[dict],
        phase_skill: dict[str, str],
        phases: list[str],
        skill_text: dict[str, str],
        subtask_vectors: dict[str, np.ndarray],
        seed: int,
        views: tuple[str, ...] = ('front',),
    ):
        self.rng = np.random.default_rng(seed)
        self.images = torch.from_numpy(
            np.concatenate([np.stack(episode_views(e, views), axis=1) for e in episodes])
        )  # [F,V,S,S,3] uint8
        self.view_px = torch.from_numpy(
            np.concatenate(
                [
                    np.stack([e[f'pixels_{v}'] for v in views[1:]], axis=1)
                    if len(views) > 1
                    else np.zeros((len(e['images']), 0, 2, 2), np.float32)
                    for e in episodes
                ]
            ).astype(np.float32)
        )  # [F,V-1,2,2]: apple and fridge centres in the other views (NaN: out of view)
        self.frame_ep = np.concatenate(
            [np.full(len(e['images']), i) for i, e in enumerate(episodes)]
        )
        self.frame_tick = np.concatenate([e['frame_tick'] for e in episodes])
        self.frame_objects = np.concatenate(
            [
                np.concatenate(
                    [e['apple'][e['frame_tick']], np.tile(e['fridge'], (len(e['frame_tick']), 1))],
                    1,
                )
                for e in episodes
            ]
        ).astype(np.float32)
        self.episodes = episodes
        # per tick: its episode's first frame index and the frame ticks, to find the latest frame
        self.first_frame = np.cumsum([0] + [len(e['images']) for e in episodes])[:-1]
        self.tick_ep = np.concatenate(
            [np.full(len(e['chunks']), i) for i, e in enumerate(episodes)]
        )
        self.tick_t = np.concatenate([np.arange(len(e['chunks'])) for e in episodes])
        texts = list(skill_text.values())
        self.vectors = np.stack(
            [subtask_vectors[t] for t in texts] + [np.zeros_like(subtask_vectors[texts[0]])]
        )
        text_index = {t: i for i, t in enumerate(texts)}
        self.phase_vec = np.array([text_index[skill_text[phase_skill[p]]] for p in phases])

    def __len__(self) -> int:
        return len(self.frame_ep)

    def frames(self, batch: int):
        """(images [B,V,S,S,3] uint8, object positions [B,5], their pixels in the views
        after the first [B,V-1,2,2]) for random demonstration frames."""
        f = torch.from_numpy(self.rng.integers(0, len(self), batch))
        return self.images[f], torch.from_numpy(self.frame_objects[f.numpy()]), self.view_px[f]

    def ticks(self, batch: int, predicted: np.ndarray | None = None):
        """(joint states, true object positions, the world expert's estimate from the
        latest frame up to STATE_LAG_TICKS before the tick -- as in serving, where a
        representation serves the ticks after its frame --, chunks, subtask vectors).
        Without ``predicted`` the estimate is the true positions."""
        k = self.rng.integers(0, len(self.tick_ep), batch)
        q, true, est, chunk, phase = [], [], [], [], []
        for ei, t in zip(self.tick_ep[k], self.tick_t[k], strict=True):
            ep = self.episodes[ei]
            lag = int(self.rng.integers(0, STATE_LAG_TICKS))
            f = max(0, int(np.searchsorted(ep['frame_tick'], t - lag, side='right')) - 1)
            q.append(ep['joint_positions'][t])
            true.append(np.concatenate([ep['apple'][t], ep['fridge']]))
            est.append(true[-1] if predicted is None else predicted[self.first_frame[ei] + f])
            chunk.append(ep['chunks'][t])
            phase.append(ep['phase'][t])
        t_ = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
        return t_(q), t_(true), t_(est), t_(chunk), self.subtasks(phase)

    def subtasks(self, phases) -> torch.Tensor:
        """Subtask vectors for expert phases: the phase's own half the time, else another
        subtask of the plan or none."""
        idx = [
            self.phase_vec[p]
            if self.rng.random() < 0.5
            else self.rng.integers(0, len(self.vectors))
            for p in phases
        ]
        return torch.from_numpy(self.vectors[np.array(idx)].astype(np.float32))


def episode_views(episode: dict, views) -> list[np.ndarray]:
    """An episode's frames [F,S,S,3] per view: ``images`` is the first (front) view."""
    missing = [v for v in views[1:] if f'images_{v}' not in episode]
    if missing:
        raise ValueError(f'the dataset lacks the views {missing} (record it again: `make data`)')
    return [episode['images']] + [episode[f'images_{v}'] for v in views[1:]]


def pixels(images_u8: torch.Tensor) -> torch.Tensor:
    """[B,S,S,3] uint8 -> normalised [B,3,S,S], as ``image.Preprocessor`` does for one frame."""
    return images_u8.permute(0, 3, 1, 2).float() * (2.0 / 255.0) - 1.0


def world_representation(world: ViTModel, images_u8: torch.Tensor) -> torch.Tensor:
    """Observations [B,V,S,S,3] uint8 -> the representation [B, V*tokens, width]: every view
    through the same ViT in one forward, views stacked as the serving world expert does."""
    b, v = images_u8.shape[:2]
    rep = world(pixel_values=pixels(images_u8.flatten(0, 1))).last_hidden_state
    return rep.reshape(b, v * rep.shape[1], rep.shape[2])


def widen_views(action: ActionExpert, views: int) -> ActionExpert:
    """A one-view action expert as the start of a ``views``-view one: the ViT is shared by
    every view, so a front-camera model is a warm start for more cameras. The object head's
    input grows from one CLS token to ``views`` side by side; the first view keeps its
    weights, the others' start at zero, and the policy MLP is kept as it is. (The head's
    LayerNorm now normalises over every view's token, so the start is close to the
    one-view model, not equal to it.)"""
    import copy

    cfg = copy.deepcopy(action.config)
    cfg.views = views
    wide = ActionExpert(cfg)
    state = action.state_dict()
    ln_w, ln_b = state['object_head.0.weight'], state['object_head.0.bias']
    lin = state['object_head.1.weight']  # [d, d]
    state['object_head.0.weight'] = ln_w.repeat(views)
    state['object_head.0.bias'] = ln_b.repeat(views)
    state['object_head.1.weight'] = torch.cat([lin] + [torch.zeros_like(lin)] * (views - 1), 1)
    wide.load_state_dict(state)
    return wide


class WorldTrainer(nn.Module):
    """The world expert with the action expert's object head, plus a training-only patch head."""

    def __init__(self, world: ViTModel, action: ActionExpert):
        super().__init__()
        self.world, self.action = world, action
        # per patch: apple and fridge "centre here" logits, then their (col, row) offsets in
        # the patch
        self.patch_head = nn.Linear(world.config.hidden_size, 6)

    def forward(self, images_u8):
        """[B,V,S,S,3] -> (object positions [B,5], patch outputs [B,V,patches,6])."""
        b, v = images_u8.shape[:2]
        rep = world_representation(self.world, images_u8)
        per_view = rep.reshape(b, v, -1, rep.shape[-1])
        return self.action.objects(rep), self.patch_head(per_view[:, :, 1:])


@torch.no_grad()
def estimate_objects(
    world: ViTModel,
    action: ActionExpert,
    images_u8: torch.Tensor,
    batch: int = 128,
    progress: bool = False,
) -> np.ndarray:
    """The trained experts' object positions [F, 5] for every frame: the inputs the action
    expert gets in serving, errors included."""
    from tqdm import tqdm

    world.eval()
    out = []
    for i in tqdm(
        range(0, len(images_u8), batch),
        desc='object estimates',
        unit='batch',
        disable=not progress,
        file=sys.stderr,
    ):
        out.append(action.objects(world_representation(world, images_u8[i : i + batch])).numpy())
    world.train()
    return np.concatenate(out).astype(np.float32)


NO_PATCH = -100  # cross_entropy's ignore_index: the object's centre is not in this view


def patch_targets(
    aux_target: torch.Tensor, image_size: int, patch: int, view_px: torch.Tensor | None = None
):
    """Object positions [B,5] (apple xyz above the table, fridge xy) and their pixels in
    the views after the front one [B,V-1,2,2] (NaN: out of view) -> the patch holding each
    centre per view [B,V,2] (NO_PATCH where out of view) and the centre's offset inside
    it [B,V,2,2] (col, row in 0..1). The front camera is fixed: its pixels come from the
    positions (clipped to the image, as the front camera always frames the table)."""
    a = aux_target.detach().numpy().astype(np.float64)
    apple = a[:, :3] + [0.0, 0.0, TABLE_Z]
    fridge = np.concatenate([a[:, 3:5], np.full((len(a), 1), TABLE_Z + 0.03)], axis=1)
    px = camera_pixels(np.stack([apple, fridge], axis=1), image_size)[:, None]  # [B,1,2,2]
    if view_px is not None and view_px.shape[1]:
        px = np.concatenate([px, view_px.numpy().astype(np.float64)], axis=1)
    px = px / patch
    grid = image_size // patch
    seen = ~np.isnan(px[..., 0])
    seen[:, 0] = True
    cell = np.clip(np.floor(np.nan_to_num(px)), 0, grid - 1)
    index = np.where(seen, cell[..., 1] * grid + cell[..., 0], NO_PATCH).astype(np.int64)
    offset = np.clip(np.nan_to_num(px) - cell, 0.0, 1.0)
    return torch.from_numpy(index), torch.from_numpy(offset.astype(np.float32))


def patch_loss(patches: torch.Tensor, index: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """patches [B,V,P,6], index [B,V,2], offset [B,V,2,2]; centres out of a view add nothing."""
    patches, index, offset = patches.flatten(0, 1), index.flatten(0, 1), offset.flatten(0, 1)
    loss = patches.new_zeros(())
    for k in range(2):  # apple, fridge
        seen = index[:, k] != NO_PATCH
        if not bool(seen.any()):
            continue
        p, i = patches[seen], index[seen, k]
        loss = loss + F.cross_entropy(p[..., k], i)
        off = p[torch.arange(len(i)), i, 2 + 2 * k : 4 + 2 * k]
        loss = loss + 0.5 * (off - offset[seen, k]).abs().mean()
    return loss


def apple_pixel_error(
    patches: torch.Tensor, index: torch.Tensor, offset: torch.Tensor, patch: int
) -> float:
    """Mean distance (pixels) between the predicted and true apple centre in the front view
    (patches [B,P,6], index [B,2], offset [B,2,2])."""
    grid = int(round(patches.shape[1] ** 0.5))
    b = torch.arange(patches.shape[0])
    k = patches[..., 0].argmax(dim=1)
    pred = torch.stack([k % grid, k // grid], dim=1).float() + patches[b, k, 2:4]
    true = torch.stack([index[:, 0] % grid, index[:, 0] // grid], dim=1).float() + offset[:, 0]
    return float((pred - true).norm(dim=1).mean() * patch)


def action_l1(pred: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
    w = torch.ones(pred.shape[-1])
    w[-1] = GRIPPER_WEIGHT
    return ((pred - chunk).abs() * w).mean()


def object_l1(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (pred - target).abs().mean() * 10.0  # metres -> decimetres


def load_datasets(data: str, max_episodes: int | None = None) -> tuple:
    """'a,b' -> (the first manifest, with every dataset's episodes listed, [episodes]).
    Later datasets (DAgger rounds) are drawn twice as often: they are few and they hold
    the states the policy actually gets into."""
    paths = [p for p in data.split(',') if p]
    manifest, episodes = load_dataset(paths[0])
    if max_episodes:
        episodes = episodes[:max_episodes]
    manifest = dict(manifest, episodes=list(manifest['episodes']))
    for path in paths[1:]:
        m, eps = load_dataset(path)
        if m['phases'] != manifest['phases']:
            raise ValueError(f'{path}: phases {m["phases"]} differ from {paths[0]}')
        if m.get('views', ['front']) != manifest.get('views', ['front']):
            raise ValueError(
                f'{path}: views {m.get("views", ["front"])} differ from '
                f'{manifest.get("views", ["front"])} in {paths[0]}'
            )
        manifest['episodes'] += m['episodes']
        episodes += eps + eps
    return manifest, episodes


def _optimizer(module: nn.Module, lr: float, steps: int):
    decay = [p for p in module.parameters() if p.ndim >= 2 and p.requires_grad]
    no_decay = [p for p in module.parameters() if p.ndim < 2 and p.requires_grad]
    opt = torch.optim.AdamW(
        [{'params': decay, 'weight_decay': 0.05}, {'params': no_decay, 'weight_decay': 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )
    warmup = max(1, min(200, steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / warmup)
            * (0.05 + 0.95 * 0.5 * (1 + np.cos(np.pi * min(1.0, s / max(1, steps)))))
        ),
    )
    return opt, sched


def train(
    data: str,
    out: str,
    steps: int = 2600,
    batch: int = 24,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = True,
    log_every: int = 25,
    val_every: int = 250,
    max_episodes: int | None = None,
    scenes: int = 16,
    init: str = '',
    action_steps: int = 6000,
    action_batch: int = 512,
    action_lr: float = 1e-3,
    views: tuple[str, ...] | None = None,
) -> dict:
    """Stage 1 (``steps``): the world expert and the object head learn where the objects
    are, on demonstration frames and freshly rendered random scenes. Stage 2
    (``action_steps``): the action expert clones the scripted expert's chunks on every
    demonstration tick (and the random scenes' states), from the object positions the
    trained world expert estimates on the tick's latest frame half the time and from
    the true positions with 4 mm noise otherwise. ``views``: the camera views the world
    expert sees (default: every view the dataset holds, front first)."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    manifest, episodes = load_datasets(data, max_episodes)
    recorded = tuple(manifest.get('views', ['front']))
    views = tuple(views) if views else recorded
    if views[0] != 'front' or not set(views) <= set(recorded):
        raise ValueError(f'views {list(views)}: the dataset has {list(recorded)}, front first')
    if len(episodes) < 2:
        raise ValueError(f'{data}: need at least 2 episodes, found {len(episodes)}')
    every = 20 if len(episodes) >= 20 else len(episodes)  # every 20th episode is held out
    val_eps = [e for i, e in enumerate(episodes) if i % every == every - 1]
    train_eps = [e for i, e in enumerate(episodes) if i % every != every - 1]
    skill_text = plan_texts()
    vectors = dict(zip(skill_text.values(), embed_texts(list(skill_text.values())), strict=True))

    def make(eps, s):
        return Batches(
            eps, manifest['phase_skill'], manifest['phases'], skill_text, vectors, s, views
        )

    train_b, val_b = make(train_eps, seed), make(val_eps, seed + 1)

    if init:  # fine-tune (a DAgger round) from verified weights
        from wam_core.models.action_expert import load_action_expert
        from wam_core.models.world_expert import WorldExpert

        world = WorldExpert(os.path.join(init, 'world_expert'), precision='fp32').model
        action, _ = load_action_expert(os.path.join(init, 'action_expert'), precision='fp32')
        if action.config.views == 1 and len(views) > 1:
            action = widen_views(action, len(views))
        elif action.config.views != len(views):
            raise ValueError(
                f'{init}: its action expert reads {action.config.views} view(s), the data '
                f'{len(views)} ({list(views)}): train from scratch instead'
            )
        world.train(), action.train()
    else:
        world = ViTModel(default_world_config(), add_pooling_layer=False)
        action = ActionExpert(
            ActionExpertConfig(
                repr_dim=world.config.hidden_size,
                repr_tokens=representation_tokens(world.config),
                num_joints=len(JOINT_NAMES),
                delta_scale=default_delta_scale(),  # the tabletop arm's
                views=len(views),
            )
        )
    trainer = WorldTrainer(world, action)
    size, patch = world.config.image_size, world.config.patch_size
    log: list[dict] = []
    t0 = time.perf_counter()

    # ---- stage 1: where the objects are ----------------------------------------------
    world_params = (
        list(world.parameters())
        + list(action.object_head.parameters())
        + list(trainer.patch_head.parameters())
    )
    opt, sched = _optimizer(nn.ParameterList(world_params), lr, steps)
    val_frames = val_b.frames(64)
    random_scenes = RandomScenes(seed, views) if scenes > 0 else None
    if scenes > 0:
        s_img, s_obj, *_, s_px = RandomScenes(seed + 99, views).sample(64)
        val_scenes = (s_img, s_obj, s_px)
    else:
        val_scenes = val_frames
    scene_states: list[tuple] = []  # (q, true objects, chunk, phase) of the rendered scenes

    def evaluate_world():
        """(object L1 on held-out frames, on unseen random scenes (dm); apple pixel error
        there)."""
        trainer.eval()
        with torch.no_grad():
            frames_l1 = float(object_l1(trainer(val_frames[0])[0], val_frames[1]))
            objects, patches = trainer(val_scenes[0])
            scene_l1 = float(object_l1(objects, val_scenes[1]))
            index, offset = patch_targets(val_scenes[1], size, patch)
            apple_px = apple_pixel_error(patches[:, 0], index[:, 0], offset[:, 0], patch)
        trainer.train()
        return frames_l1, scene_l1, apple_px

    run_obj = None
    bar = tqdm(
        range(steps), desc='world expert', unit='step', disable=not progress, file=sys.stderr
    )
    for step in bar:
        images, obj_t, px_t = train_b.frames(batch)
        if random_scenes is not None:
            extra, extra_t, extra_q, extra_chunk, extra_phase, extra_px = random_scenes.sample(
                scenes
            )
            scene_states.append((extra_q, extra_t, extra_chunk, extra_phase))
            images, obj_t = torch.cat([images, extra]), torch.cat([obj_t, extra_t])
            px_t = torch.cat([px_t, extra_px])
        objects, patches = trainer(images)
        obj = object_l1(objects, obj_t)
        loss = AUX_WEIGHT * obj + PATCH_WEIGHT * patch_loss(
            patches, *patch_targets(obj_t, size, patch, px_t)
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(world_params, 1.0)
        opt.step()
        sched.step()
        run_obj = obj.item() if run_obj is None else 0.95 * run_obj + 0.05 * obj.item()
        if step % log_every == 0 or step == steps - 1:
            row = {
                'stage': 'world',
                'step': step,
                'object_l1': obj.item(),
                'lr': sched.get_last_lr()[0],
                'seconds': round(time.perf_counter() - t0, 1),
            }
            if step % val_every == 0 or step == steps - 1:
                row['val_object_l1'], row['val_scene_object_l1'], row['val_scene_apple_px'] = (
                    evaluate_world()
                )
                bar.set_postfix(
                    obj=f'{run_obj:.3f}',
                    val=f'{row["val_object_l1"]:.3f}',
                    scene=f'{row["val_scene_object_l1"]:.3f}',
                    px=f'{row["val_scene_apple_px"]:.1f}',
                )
            log.append(row)

    # ---- stage 2: behaviour cloning of the chunks -------------------------------------
    train_est = estimate_objects(world, action, train_b.images, progress=progress)
    val_est = estimate_objects(world, action, val_b.images)
    val_ticks = val_b.ticks(512, val_est)
    if scene_states:
        scene_q, scene_obj, scene_chunk = (
            torch.cat([s[i] for s in scene_states]) for i in range(3)
        )
        scene_phase = np.concatenate([s[3] for s in scene_states])
    policy_params = [p for n, p in action.named_parameters() if not n.startswith('object_head.')]
    opt, sched = _optimizer(nn.ParameterList(policy_params), action_lr, action_steps)
    gen = torch.Generator().manual_seed(seed)

    def evaluate_action() -> float:
        """Action L1 on held-out episodes, from the world expert's estimates."""
        action.eval()
        with torch.no_grad():
            q, _, est, chunk, sub = val_ticks
            l1 = float(action_l1(action.act(est, q, sub), chunk))
        action.train()
        return l1

    n_scene = action_batch // 8 if scene_states else 0
    bar = tqdm(
        range(action_steps),
        desc='action expert',
        unit='step',
        disable=not progress,
        file=sys.stderr,
    )
    for step in bar:
        q, true, est, chunk, sub = train_b.ticks(action_batch - n_scene, train_est)
        noisy = torch.rand(len(q), 1, generator=gen) < 0.5
        objects = torch.where(noisy, true + 0.004 * torch.randn(true.shape, generator=gen), est)
        if n_scene:
            k = torch.randint(0, len(scene_q), (n_scene,), generator=gen)
            q, chunk = torch.cat([q, scene_q[k]]), torch.cat([chunk, scene_chunk[k]])
            objects = torch.cat(
                [objects, scene_obj[k] + 0.004 * torch.randn(n_scene, 5, generator=gen)]
            )
            sub = torch.cat([sub, train_b.subtasks(scene_phase[k.numpy()])])
        loss = action_l1(action.act(objects, q, sub), chunk)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy_params, 1.0)
        opt.step()
        sched.step()
        if step % (log_every * 4) == 0 or step == action_steps - 1:
            row = {
                'stage': 'action',
                'step': steps + step,
                'action_l1': loss.item(),
                'lr': sched.get_last_lr()[0],
                'seconds': round(time.perf_counter() - t0, 1),
            }
            if step % (val_every * 4) == 0 or step == action_steps - 1:
                row['val_action_l1'] = evaluate_action()
                bar.set_postfix(l1=f'{loss.item():.4f}', val=f'{row["val_action_l1"]:.4f}')
            log.append(row)
    seconds = time.perf_counter() - t0
    started_from = read_manifest(os.path.join(init, 'world_expert')).version if init else ''
    sample = (val_frames[0][:1], val_ticks[0][:1], val_ticks[4][:1])
    return save(
        trainer,
        out,
        manifest,
        data,
        seed,
        steps,
        action_steps,
        log,
        seconds,
        sample,
        started_from,
        views,
    )


def _dataset_digest(manifest: dict) -> str:
    h = hashlib.sha256()
    for e in manifest['episodes']:
        h.update(e['sha256'].encode())
    return h.hexdigest()


def save(
    trainer: WorldTrainer,
    out: str,
    manifest: dict,
    data: str,
    seed: int,
    steps: int,
    action_steps: int,
    log: list[dict],
    seconds: float,
    sample,
    started_from: str = '',
    views: tuple[str, ...] = ('front',),
) -> dict:
    digest = _dataset_digest(manifest)[:10]
    world_dir, action_dir, train_dir = (
        os.path.join(out, d) for d in ('world_expert', 'action_expert', 'training')
    )
    for d in (world_dir, action_dir):
        if os.path.isdir(d):
            for n in os.listdir(d):
                os.remove(os.path.join(d, n))
    os.makedirs(train_dir, exist_ok=True)
    last = lambda key: next((r[key] for r in reversed(log) if r.get(key) is not None), None)  # noqa: E731
    meta = {
        'seed': seed,
        'trained': True,
        'steps': steps,
        'action_steps': action_steps,
        'started_from': started_from,
        'dataset': ','.join(os.path.basename(os.path.normpath(d)) for d in data.split(',') if d),
        'dataset_sha256': _dataset_digest(manifest),
        'episodes': len(manifest['episodes']),
        'final_val_object_l1_dm': last('val_object_l1'),
        'final_val_scene_object_l1_dm': last('val_scene_object_l1'),
        'final_val_scene_apple_px': last('val_scene_apple_px'),
        'final_val_action_l1': last('val_action_l1'),
        'train_seconds': round(seconds, 1),
    }
    trainer.world.save_pretrained(world_dir)
    # the version names the data, seed and steps, and the weights themselves: another
    # recipe on the same data must never share a cache key with these
    weights = sha256_file(os.path.join(world_dir, 'model.safetensors'))[:8]
    version = f'{"dagger" if started_from else "bc"}-{digest}-s{seed}-{steps}-{weights}'
    write_manifest(world_dir, WORLD_NAME, version, dict(meta, type=WORLD_TYPE, views=list(views)))
    trainer.action.save_pretrained(action_dir)
    write_manifest(
        action_dir,
        ACTION_NAME,
        version,
        dict(
            meta,
            type=ACTION_TYPE,
            world_version=version,
            joint_names=JOINT_NAMES,
            period_s=PERIOD_S,
        ),
    )
    with open(os.path.join(train_dir, 'loss_log.csv'), 'w', newline='', encoding='utf-8') as fh:
        w = csv.DictWriter(fh, fieldnames=LOG_KEYS)
        w.writeheader()
        for row in log:
            w.writerow({k: row.get(k, '') for k in LOG_KEYS})
    plot_loss(log, os.path.join(train_dir, 'loss.png'))
    write_reference_sample(
        world_dir, action_dir, sample, os.path.join(train_dir, 'reference_sample.npz'), views
    )
    with open(os.path.join(train_dir, 'summary.json'), 'w', encoding='utf-8') as fh:
        json.dump(dict(meta, version=version), fh, indent=1)
    return dict(meta, version=version, world_dir=world_dir, action_dir=action_dir)


LOG_KEYS = [
    'stage',
    'step',
    'object_l1',
    'val_object_l1',
    'val_scene_object_l1',
    'val_scene_apple_px',
    'action_l1',
    'val_action_l1',
    'lr',
    'seconds',
]


def write_reference_sample(
    world_dir: str, action_dir: str, sample, path: str, views: tuple[str, ...] = ('front',)
) -> None:
    """A stored input and the saved experts' output on it, loaded the way serving loads them.
    sample: (observations [1,V,S,S,3] uint8, joint state [1,N], subtask [1,S]). Stored as
    ``image`` (the front view), ``image_<view>`` for the others."""
    from wam_core.models.action_expert import load_action_expert
    from wam_core.models.contract import Observation
    from wam_core.models.world_expert import WorldExpert

    world = WorldExpert(world_dir, precision='fp32')
    action, _ = load_action_expert(action_dir, precision='fp32')
    frames = {v: sample[0][0, i].numpy() for i, v in enumerate(views)}
    q, sub = sample[1][:1], sample[2][:1]
    rep = world.encode(Observation(frames))
    with torch.inference_mode():
        chunk = action(torch.from_numpy(rep).unsqueeze(0), q, sub)[0].numpy()
    np.savez_compressed(
        path,
        image=frames[views[0]],
        **{f'image_{v}': frames[v] for v in views[1:]},
        joint_positions=q[0].numpy(),
        subtask=sub[0].numpy(),
        representation=rep,
        chunk=chunk,
    )


def plot_loss(log: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, (ax_w, ax_a) = plt.subplots(1, 2, figsize=(11, 4))

    def series(stage, key):
        return [(r['step'], r[key]) for r in log if r['stage'] == stage and r.get(key) is not None]

    for ax, stage, keys in (
        (
            ax_w,
            'world',
            [
                ('object_l1', 'object L1, train (dm)'),
                ('val_object_l1', 'object L1, held-out frames (dm)'),
                ('val_scene_object_l1', 'object L1, unseen scenes (dm)'),
                ('val_scene_apple_px', 'apple centre error, unseen scenes (px)'),
            ],
        ),
        (
            ax_a,
            'action',
            [('action_l1', 'action L1, train'), ('val_action_l1', 'action L1, held-out episodes')],
        ),
    ):
        for key, label in keys:
            pts = series(stage, key)
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    'o-' if key.startswith('val') else '-',
                    label=label,
                    lw=1,
                    ms=3,
                )
        ax.set_yscale('log')
        ax.set_xlabel('step')
        ax.legend(fontsize=8)
    ax_w.set_title('stage 1: world expert + object head')
    ax_a.set_title('stage 2: action expert (behaviour cloning)')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        '--data', default='datasets/pick_place', help='dataset folders, comma-separated'
    )
    ap.add_argument(
        '--init',
        default='',
        help='start from the experts in this folder (a DAgger round; a one-view model widens '
        "to the data's views)",
    )
    ap.add_argument('--out', default='models')
    ap.add_argument('--steps', type=int, default=2600, help='world-expert steps (stage 1)')
    ap.add_argument('--action-steps', type=int, default=6000, help='action-expert steps (stage 2)')
    ap.add_argument(
        '--batch', type=int, default=24, help='demonstration frames per world-expert step'
    )
    ap.add_argument(
        '--scenes',
        type=int,
        default=16,
        help='random scenes per world-expert step (their states also become action labels)',
    )
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 4)))
    info = train(
        args.data,
        args.out,
        args.steps,
        args.batch,
        lr=args.lr,
        seed=args.seed,
        scenes=args.scenes,
        init=args.init,
        action_steps=args.action_steps,
    )
    print(
        f'trained {info["version"]} in {info["train_seconds"]} s: held-out action L1 '
        f'{info["final_val_action_l1"]:.4f}; wrote {info["world_dir"]}, {info["action_dir"]}'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())

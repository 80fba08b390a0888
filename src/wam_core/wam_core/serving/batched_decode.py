"""Several robots' ticks with their decodes in one forward (an action-expert instance).

Each robot keeps its own ticker (its representation, joint state, subtask, scene and
counters); only the decode is shared: the robots whose tick reached a decode on the
same model are decoded together, ``max_size`` at a time, when the model offers
``decode_batch`` (an optional member of the expert contract), else one after another.
One robot's failure stays its own: an exception in its begin or finish is returned in
its place, and a batch that raises is decoded again robot by robot, so a robot whose
input breaks the model cannot take the others' chunks with it.
"""

from __future__ import annotations

import time

import torch

from .action_ticker import ActionTicker, PendingDecode, TickResult


def too_slow_for_an_instance(warm_ms: list[float], budget_ms: float) -> str | None:
    """Why a model cannot be decoded on an instance's one tick, or None: its decode cost,
    the fastest of its warm-up passes, above the tick's budget. The fastest, not the
    median: an instance's robots warm up while a fleet comes up on the same cores (8
    robots on 2 cores: medians of 27-42 ms for a 0.4 ms decode refused every instance,
    2026-12-03); contention only adds to a pass, and a model slower than the budget is
    slower in every pass."""
    if not warm_ms:
        return None
    fastest = min(warm_ms)
    if fastest <= budget_ms:
        return None
    return f'this model decodes in {fastest:.1f} ms at best (warm-up, budget {budget_ms:g} ms)'


def decode_together(
    tickers: list[ActionTicker], max_size: int = 16
) -> tuple[list[TickResult | BaseException], int]:
    """One tick of every ticker: each one's result (or the exception it raised) in order,
    and the largest number of robots one forward decoded."""
    out: list[TickResult | PendingDecode | BaseException] = []
    largest = 0
    with torch.inference_mode():
        for t in tickers:
            try:
                out.append(t.begin())
            except Exception as exc:
                out.append(exc)
        groups: dict[int, list[int]] = {}
        for i, p in enumerate(out):
            if isinstance(p, PendingDecode):
                groups.setdefault(id(tickers[i].model), []).append(i)
        for idxs in groups.values():
            model = tickers[idxs[0]].model
            batched = getattr(model, 'decode_batch', None)
            step = max(1, max_size) if batched is not None else 1
            for k in range(0, len(idxs), step):
                part = idxs[k : k + step]
                chunks, together = _decode(tickers, out, part, model, batched)
                largest = max(largest, together)
                for i in part:
                    p = out[i]
                    chunk = chunks.get(i)
                    if isinstance(chunk, BaseException):
                        tickers[i].abandon(p)
                        out[i] = chunk
                        continue
                    try:
                        out[i] = tickers[i].finish(p, chunk)
                    except Exception as exc:
                        out[i] = exc
    return out, largest


def _decode(tickers, pending, part, model, batched) -> tuple[dict, int]:
    """Each robot's [H, N] chunk tensor (or its exception), by index; and how many robots
    one forward decoded."""
    started = time.perf_counter()
    for i in part:
        pending[i].decode_started = started
    if batched is not None and len(part) > 1:
        try:
            joints, conds = zip(*(tickers[i].decode_inputs() for i in part), strict=True)
            chunks = batched([pending[i].scene for i in part], torch.cat(joints), torch.cat(conds))
            return {i: chunks[j] for j, i in enumerate(part)}, len(part)
        except Exception:
            pass  # decoded again one by one below: a robot's own fault is then its own
    out = {}
    for i in part:
        pending[i].decode_started = time.perf_counter()
        try:
            joint, cond = tickers[i].decode_inputs()
            out[i] = model.decode(pending[i].scene, joint, cond)[0]
        except Exception as exc:
            out[i] = exc
    return out, 1

"""Grounded plans: a plan may name only objects the robot reports perceiving.

The robot agent's PERCEIVE step publishes the objects it sees; whichever planner made a
plan (LLM, rules, similarity), a plan naming anything else is refused with a reason a
person can act on: "no green banana in view; I see: red apple, fridge". A plan object
without a colour matches any perceived object of its class.
"""

from __future__ import annotations

from collections.abc import Iterable

from .plan import ObjectRef, Plan


def parse_scene(items: Iterable[str]) -> list[ObjectRef]:
    """'red apple' / 'fridge' -> ObjectRef (the last word is the class)."""
    out = []
    for item in items:
        words = item.strip().lower().split()
        if words:
            out.append(ObjectRef(words[-1], ' '.join(words[:-1])))
    return out


def matches(wanted: ObjectRef, seen: ObjectRef) -> bool:
    return wanted.cls == seen.cls and (not wanted.color or wanted.color == seen.color)


def unseen(plan: Plan, perceived: Iterable[ObjectRef]) -> list[ObjectRef]:
    """The plan's objects and destinations that match nothing perceived (in plan order)."""
    seen = list(perceived)
    out: list[ObjectRef] = []
    for s in plan.subtasks:
        for o in (s.object, s.destination):
            if o is not None and o not in out and not any(matches(o, p) for p in seen):
                out.append(o)
    return out


def grounding_reason(plan: Plan, perceived: Iterable[ObjectRef]) -> str | None:
    """Why the plan cannot run in this scene, or None when every object is in view."""
    seen = list(perceived)
    missing = unseen(plan, seen)
    if not missing:
        return None
    names = ', '.join(o.text() for o in missing)
    view = ', '.join(o.text() for o in seen) or 'nothing'
    return f'no {names} in view; I see: {view}'

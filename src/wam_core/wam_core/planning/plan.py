"""Task plans: a list of subtasks from a fixed skill vocabulary, and their validation.

Every plan, whichever planner made it (LLM or rules), goes through ``validate_plan``
before it conditions the robot: known skills only, objects with a class and optional
colour, a destination where the skill needs one, bounded sizes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SKILLS = (
    'perceive',
    'locate',
    'navigate',
    'grasp',
    'transport',
    'place',
    'open',
    'close',
    'release',
)
NEEDS_OBJECT = {'locate', 'navigate', 'grasp', 'transport', 'place', 'open', 'close'}
NEEDS_DESTINATION = {'transport', 'place'}
MAX_SUBTASKS = 16
MAX_FIELD = 64
MAX_INSTRUCTION = 512  # characters; longer instructions are refused


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class ObjectRef:
    cls: str
    color: str = ''

    def text(self) -> str:
        return f'{self.color} {self.cls}'.strip()


@dataclass(frozen=True)
class Subtask:
    skill: str
    object: ObjectRef | None = None
    destination: ObjectRef | None = None

    def text(self) -> str:
        """The sentence that is embedded to condition the action expert."""
        s = self.skill
        if self.object:
            s += f' the {self.object.text()}'
        if self.destination:
            s += f' to the {self.destination.text()}'
        return s


@dataclass(frozen=True)
class Plan:
    subtasks: list[Subtask]
    source: str = 'rules'  # 'llm' | 'rules'

    def steps(self) -> list[str]:
        """The skill chain, one 'skill [object] [> destination]' per subtask."""
        out = []
        for s in self.subtasks:
            step = s.skill + (f' {s.object.text()}' if s.object else '')
            out.append(step + (f' > {s.destination.text()}' if s.destination else ''))
        return out

    def to_json(self) -> dict[str, Any]:
        def obj(o):
            return None if o is None else {'class': o.cls, 'color': o.color}

        return {
            'subtasks': [
                {'skill': s.skill, 'object': obj(s.object), 'destination': obj(s.destination)}
                for s in self.subtasks
            ]
        }


_OBJ_SCHEMA = {
    'anyOf': [
        {'type': 'null'},
        {
            'type': 'object',
            'additionalProperties': False,
            'required': ['class', 'color'],
            'properties': {
                'class': {'type': 'string', 'minLength': 1, 'maxLength': MAX_FIELD},
                'color': {'type': 'string', 'maxLength': MAX_FIELD},
            },
        },
    ]
}

PLAN_SCHEMA: dict[str, Any] = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['subtasks'],
    'properties': {
        'subtasks': {
            'type': 'array',
            'minItems': 1,
            'maxItems': MAX_SUBTASKS,
            'items': {
                'type': 'object',
                'additionalProperties': False,
                'required': ['skill', 'object', 'destination'],
                'properties': {
                    'skill': {'type': 'string', 'enum': list(SKILLS)},
                    'object': _OBJ_SCHEMA,
                    'destination': _OBJ_SCHEMA,
                },
            },
        }
    },
}


def _obj(value: Any, where: str) -> ObjectRef | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {'class', 'color'}:
        raise PlanError(f'{where} must be null or {{"class", "color"}}')
    cls, color = value.get('class'), value.get('color', '')
    if not isinstance(cls, str) or not cls.strip() or len(cls) > MAX_FIELD:
        raise PlanError(
            f'{where}.class must be a non-empty string of at most {MAX_FIELD} characters'
        )
    if not isinstance(color, str) or len(color) > MAX_FIELD:
        raise PlanError(f'{where}.color must be a string of at most {MAX_FIELD} characters')
    return ObjectRef(cls.strip().lower(), color.strip().lower())


def validate_plan(doc: Any, source: str) -> Plan:
    """A parsed JSON document -> Plan, or PlanError naming the first problem."""
    if not isinstance(doc, dict) or set(doc) != {'subtasks'}:
        raise PlanError('plan must be an object with exactly one key "subtasks"')
    items = doc['subtasks']
    if not isinstance(items, list) or not items:
        raise PlanError('plan.subtasks must be a non-empty list')
    if len(items) > MAX_SUBTASKS:
        raise PlanError(f'plan has {len(items)} subtasks (max {MAX_SUBTASKS})')
    out = []
    for i, item in enumerate(items):
        where = f'subtasks[{i}]'
        if not isinstance(item, dict) or set(item) - {'skill', 'object', 'destination'}:
            raise PlanError(f'{where} must have only skill/object/destination')
        skill = item.get('skill')
        if skill not in SKILLS:
            raise PlanError(f'{where}.skill {skill!r} is not one of {", ".join(SKILLS)}')
        obj = _obj(item.get('object'), f'{where}.object')
        dest = _obj(item.get('destination'), f'{where}.destination')
        if skill in NEEDS_OBJECT and obj is None:
            raise PlanError(f'{where}: {skill} needs an object')
        if skill in NEEDS_DESTINATION and dest is None:
            raise PlanError(f'{where}: {skill} needs a destination')
        out.append(Subtask(skill, obj, dest))
    return Plan(out, source)


def plan_as_dicts(plan: Plan) -> list[dict[str, Any]]:
    return [asdict(s) for s in plan.subtasks]

"""Rule planner: deterministic, instant, English and Chinese, the fallback for the LLM.

An instruction is split into clauses ("and then", "然后", ...); each clause is read
in its own language (so "pick up the apple, 然后放进冰箱" works) after politeness is
stripped ("could you please", "for me", "请", "帮我"), matches one verb pattern
(synonyms: grab, take, fetch, lift; 把…拿起来, 放到…里), and its object phrases give a
class from a small vocabulary and an optional colour. "it" (它), or nothing at all
after a grasp ("放进冰箱"), refers to the last object. Anything it cannot read is
refused with a reason, never guessed.
"""

from __future__ import annotations

import re

from .plan import MAX_INSTRUCTION, ObjectRef, Plan, PlanError, Subtask, validate_plan

COLORS = {
    'red',
    'green',
    'blue',
    'yellow',
    'white',
    'black',
    'orange',
    'purple',
    'pink',
    'brown',
    'grey',
    'gray',
}
OBJECTS = {
    'apple': 'apple',
    'apples': 'apple',
    'cube': 'cube',
    'cubes': 'cube',
    'block': 'cube',
    'blocks': 'cube',
    'ball': 'ball',
    'cup': 'cup',
    'mug': 'cup',
    'bottle': 'bottle',
    'banana': 'banana',
    'box': 'box',
    'fridge': 'fridge',
    'refrigerator': 'fridge',
    'drawer': 'drawer',
    'table': 'table',
    'basket': 'basket',
    'bowl': 'bowl',
    'container': 'container',
    'bin': 'bin',
    'plate': 'plate',
    'door': 'door',
    'shelf': 'shelf',
    'orange': 'orange',
}
ZH_COLORS = {
    '红': 'red',
    '绿': 'green',
    '蓝': 'blue',
    '黄': 'yellow',
    '白': 'white',
    '黑': 'black',
    '橙': 'orange',
    '紫': 'purple',
    '粉': 'pink',
    '棕': 'brown',
    '灰': 'grey',
}
ZH_OBJECTS = {
    '苹果': 'apple',
    '方块': 'cube',
    '积木': 'cube',
    '球': 'ball',
    '杯子': 'cup',
    '瓶子': 'bottle',
    '香蕉': 'banana',
    '盒子': 'box',
    '冰箱': 'fridge',
    '抽屉': 'drawer',
    '桌子': 'table',
    '篮子': 'basket',
    '碗': 'bowl',
    '容器': 'container',
    '盘子': 'plate',
    '门': 'door',
    '架子': 'shelf',
    '橙子': 'orange',
}
PRONOUNS = {'it', 'them', 'that', 'this one'}
DETERMINERS = ('the ', 'a ', 'an ', 'that ', 'this ', 'my ', 'some ')

_EN_SPLIT = re.compile(r'\s*(?:,?\s*and then\s+|,?\s*then\s+|,\s*and\s+|\s+and\s+|[,;.]\s*)\s*')
_ZH_SPLIT = re.compile(r'\s*(?:然后|接着|之后|再|并且|并|[，,；;。])\s*')
_EN = [
    (
        'navigate',
        re.compile(
            r'^(?:go|navigate|move|drive) (?:over )?to (?P<obj>.+)$'
            r'|^(?:approach|reach) (?P<obj2>.+)$'
        ),
    ),
    (
        'put',
        re.compile(
            r'^(?:put|place|move|bring|carry|transport|set|drop|fetch|get) (?P<obj>.+?) '
            r'(?:in|into|inside|on|onto|to|in to|on to) (?:the inside of )?(?P<dest>.+)$'
        ),
    ),
    (
        'grasp',
        re.compile(
            r'^(?:pick up|pick|grasp|grab|take hold of|take|lift|hold|get|fetch|collect) '
            r'(?:up )?(?P<obj>.+?)(?: up)?$'
        ),
    ),
    ('open', re.compile(r'^open (?P<obj>.+)$')),
    ('close', re.compile(r'^(?:close|shut) (?P<obj>.+)$')),
    ('locate', re.compile(r'^(?:find|locate|look for|search for|detect|where is) (?P<obj>.+)$')),
    (
        'release',
        re.compile(r'^(?:release|let go(?: of)?|drop|open the gripper)(?: (?P<obj>.+))?$'),
    ),
    ('perceive', re.compile(r'^(?:look around|look at the scene|perceive|scan|observe)(?: .*)?$')),
]
_ZH = [
    (
        'put',
        re.compile(
            r'^把(?P<obj>.+?)(?:放进|放到|放在|放入|搬到|拿到|移到|送到)(?P<dest>.+?)(?:里面|里|上面|上|中)?$'
        ),
    ),
    # 把 X 拿起来: a grasp in the 把 construction
    ('grasp', re.compile(r'^把(?P<obj>.+?)(?:拿起来|抓起来|捡起来|举起来|拿起|抓起|捡起)$')),
    # 放进冰箱 after a grasp: the object is the one held
    (
        'put',
        re.compile(r'^(?:放进|放到|放在|放入|搬到|送到)(?P<dest>.+?)(?:里面|里|上面|上|中)?$'),
    ),
    ('open', re.compile(r'^打开(?P<obj>.+)$')),
    ('close', re.compile(r'^(?:关上|关闭|关)(?P<obj>.+)$')),
    ('grasp', re.compile(r'^(?:拿起|抓起|抓住|捡起|拿|抓)(?P<obj>.+)$')),
    ('locate', re.compile(r'^(?:找到|寻找|找)(?P<obj>.+)$')),
    ('navigate', re.compile(r'^(?:走到|移动到|前往|去)(?P<obj>.+)$')),
    ('release', re.compile(r'^(?:松开|放开|放下)(?P<obj>.*)$')),
]
_ZH_CHARS = re.compile(r'[\u4e00-\u9fff]')
_EN_POLITE = re.compile(
    r'^(?:please|kindly|could you|can you|would you|will you|hey robot|robot|hey|'
    r"i'd like you to|i would like you to|i want you to|go ahead and)(?:[, ]+|$)"
)
_EN_TAIL = re.compile(r'(?:[, ]+)(?:please|for me|thanks|thank you|now)$')
_ZH_POLITE = re.compile(r'^(?:请你|请|麻烦你|麻烦|帮我|帮忙|你能|能不能|可以)\s*')
_ZH_TAIL = re.compile(r'(?:吗|好吗|好不好|谢谢|一下)$')


def _strip_politeness(text: str) -> str:
    """'could you please X for me' -> 'X'; '请帮我X' -> 'X' (repeatedly, both ends)."""
    while True:
        t = text.strip().rstrip('!?.。！？ ')
        t = _ZH_TAIL.sub('', _ZH_POLITE.sub('', _EN_TAIL.sub('', _EN_POLITE.sub('', t))))
        if t == text:
            return t
        text = t


class RulePlanner:
    name = 'rules'

    def plan(self, instruction: str) -> Plan:
        if not isinstance(instruction, str) or not instruction.strip():
            raise PlanError('empty instruction')
        if len(instruction) > MAX_INSTRUCTION:
            raise PlanError(f'instruction longer than {MAX_INSTRUCTION} characters')
        text = _strip_politeness(re.sub(r'\s+', ' ', instruction.strip().lower()))
        steps: list[Subtask] = []
        held: ObjectRef | None = None
        last: ObjectRef | None = None
        clauses = self.clauses(text)
        if not clauses:
            raise PlanError(f'nothing to do in {instruction.strip()[:40]!r}')
        for clause, zh in clauses:
            verb, obj_text, dest_text = self._match(clause, zh)
            obj = self._object(obj_text, zh, last) if obj_text else None
            dest = self._object(dest_text, zh, last) if dest_text else None
            if verb == 'put' and obj is None:  # "放进冰箱" after a grasp: what is held
                obj = held or last
                if obj is None:
                    raise PlanError(f'{clause!r}: put what?')
            if verb == 'put':
                if held != obj:
                    steps += [Subtask('locate', obj), Subtask('grasp', obj)]
                steps += [
                    Subtask('transport', obj, dest),
                    Subtask('place', obj, dest),
                    Subtask('release', obj),
                ]
                held = None
            elif verb == 'grasp':
                steps += [Subtask('locate', obj), Subtask('grasp', obj)]
                held = obj
            elif verb == 'open':
                steps += [Subtask('locate', obj), Subtask('open', obj)]
            elif verb == 'release':
                steps.append(Subtask('release', obj or held))
                held = None
            elif verb == 'perceive':
                steps.append(Subtask('perceive'))
            else:  # locate, navigate, close
                steps.append(Subtask(verb, obj))
            last = obj or last
        if not steps or steps[0].skill != 'perceive':
            steps.insert(0, Subtask('perceive'))
        return validate_plan(Plan(steps).to_json(), self.name)

    @staticmethod
    def clauses(text: str) -> list[tuple[str, bool]]:
        """The instruction's clauses, each with whether it is Chinese (mixed instructions
        are read clause by clause)."""
        out = []
        pieces = _ZH_SPLIT.split(text) if _ZH_CHARS.search(text) else [text]
        for piece in pieces:
            piece = _strip_politeness(piece or '')
            if not piece:
                continue
            if _ZH_CHARS.search(piece):
                out.append((piece, True))
            else:
                out += [(c.strip(), False) for c in _EN_SPLIT.split(piece) if c and c.strip()]
        return [(c, zh) for c, zh in ((_strip_politeness(c), zh) for c, zh in out) if c]

    def _match(self, clause: str, zh: bool) -> tuple[str, str, str]:
        for verb, pat in _ZH if zh else _EN:
            m = pat.match(clause)
            if m:
                g = {k: v for k, v in m.groupdict().items() if v}
                obj = g.get('obj') or g.get('obj2') or ''
                return verb, obj, g.get('dest', '')
        raise PlanError(f'no known skill in {clause!r}')

    def _object(self, phrase: str, zh: bool, last: ObjectRef | None) -> ObjectRef:
        # an English phrase inside a Chinese clause ("把 red apple 放进 fridge") is English
        zh = zh and bool(_ZH_CHARS.search(phrase))
        return self._zh_object(phrase, last) if zh else self._en_object(phrase.strip(), last)

    @staticmethod
    def _en_object(phrase: str, last: ObjectRef | None) -> ObjectRef:
        p = re.split(
            r' (?:on|from|at|near|next to|inside|in|of) (?:the )?', phrase.strip(), maxsplit=1
        )[0]
        if p in PRONOUNS:
            if last is None:
                raise PlanError(f'{p!r} refers to nothing')
            return last
        for d in DETERMINERS:
            if p.startswith(d):
                p = p[len(d) :]
        words = p.split()
        cls = next((OBJECTS[w] for w in reversed(words) if w in OBJECTS), None)
        if cls is None:
            raise PlanError(f'unknown object {phrase!r}')
        color = next((w for w in words if w in COLORS and OBJECTS.get(w) != cls), '')
        return ObjectRef(cls, 'grey' if color == 'gray' else color)

    @staticmethod
    def _zh_object(phrase: str, last: ObjectRef | None) -> ObjectRef:
        p = phrase.strip()
        if p in ('它', '它们'):
            if last is None:
                raise PlanError(f'{p!r} refers to nothing')
            return last
        segs = [x for x in p.split('的') if x] or [p]  # "桌上的红色苹果", "蓝色的球"
        cls = next((v for k, v in ZH_OBJECTS.items() if k in segs[-1]), None)
        if cls is None:
            raise PlanError(f'unknown object {phrase!r}')
        # the colour sits in the noun's own segment or in the one right before it
        near = segs[-1] + (segs[-2] if len(segs) > 1 else '')
        color = next((v for k, v in ZH_COLORS.items() if k in near), '')
        return ObjectRef(cls, color)


def mentions(instruction: str, cls: str) -> bool:
    """Does the instruction name an object of this class (any synonym, either language)?"""
    text = instruction.lower()
    words = set(re.findall(r'[a-z]+', text))
    if cls in words or any(OBJECTS.get(w) == cls for w in words):
        return True
    return any(v == cls and k in instruction for k, v in ZH_OBJECTS.items())


def ungrounded_objects(plan: Plan, instruction: str) -> list[str]:
    """Object classes the plan uses that the instruction never names (LLM hallucinations)."""
    classes = {o.cls for s in plan.subtasks for o in (s.object, s.destination) if o is not None}
    return sorted(c for c in classes if not mentions(instruction, c))

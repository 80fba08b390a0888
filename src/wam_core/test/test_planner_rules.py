"""Rule planner: a table of English and Chinese instructions with their expected plans."""

import pytest

from wam_core.planning.plan import MAX_INSTRUCTION, PLAN_SCHEMA, PlanError, validate_plan
from wam_core.planning.rules import RulePlanner

PUT_APPLE_FRIDGE = (
    'perceive; locate red apple; grasp red apple; transport red apple>fridge; '
    'place red apple>fridge; release red apple'
)


def compact(plan):
    out = []
    for s in plan.subtasks:
        t = s.skill
        if s.object:
            t += ' ' + s.object.text()
        if s.destination:
            t += '>' + s.destination.text()
        out.append(t)
    return '; '.join(out)


TABLE = [
    ('put the red apple in the fridge', PUT_APPLE_FRIDGE),
    ('Put the red apple in the fridge.', PUT_APPLE_FRIDGE),
    ('Please place the red apple into the fridge', PUT_APPLE_FRIDGE),
    ('Grasp the red apple and put it in the fridge', PUT_APPLE_FRIDGE),
    ('pick up the red apple, then put it in the fridge', PUT_APPLE_FRIDGE),
    ('take the red apple and then place it inside the refrigerator', PUT_APPLE_FRIDGE),
    ('move the red apple to the fridge', PUT_APPLE_FRIDGE),
    ('bring the red apple on the table to the fridge', PUT_APPLE_FRIDGE),
    ('pick up the green cube', 'perceive; locate green cube; grasp green cube'),
    ('grab a blue ball', 'perceive; locate blue ball; grasp blue ball'),
    ('find the yellow banana', 'perceive; locate yellow banana'),
    ('look for the white cup', 'perceive; locate white cup'),
    ('open the fridge', 'perceive; locate fridge; open fridge'),
    ('close the drawer', 'perceive; close drawer'),
    ('shut the fridge door', 'perceive; close door'),
    ('go to the table', 'perceive; navigate table'),
    ('navigate to the basket', 'perceive; navigate basket'),
    ('approach the red box', 'perceive; navigate red box'),
    (
        'open the fridge, put the red apple in the fridge and close the fridge',
        'perceive; locate fridge; open fridge; locate red apple; grasp red apple; '
        'transport red apple>fridge; '
        'place red apple>fridge; release red apple; close fridge',
    ),
    (
        'pick up the blue cube and put it on the plate',
        'perceive; locate blue cube; grasp blue cube; transport blue cube>plate; '
        'place blue cube>plate; '
        'release blue cube',
    ),
    (
        'put the green block into the bowl',
        'perceive; locate green cube; grasp green cube; '
        'transport green cube>bowl; place green cube>bowl; release green cube',
    ),
    ('grasp the orange', 'perceive; locate orange; grasp orange'),
    ('pick up the cup and release it', 'perceive; locate cup; grasp cup; release cup'),
    ('look around', 'perceive'),
    ('把桌上的红色苹果放进冰箱', PUT_APPLE_FRIDGE),
    ('请把红苹果放到冰箱里', PUT_APPLE_FRIDGE),
    ('拿起红色苹果，然后把它放进冰箱', PUT_APPLE_FRIDGE),
    ('抓住绿色方块', 'perceive; locate green cube; grasp green cube'),
    ('打开冰箱', 'perceive; locate fridge; open fridge'),
    ('关上抽屉', 'perceive; close drawer'),
    ('找到蓝色的球', 'perceive; locate blue ball'),
    ('走到桌子', 'perceive; navigate table'),
    (
        '把黄色香蕉放在盘子上',
        'perceive; locate yellow banana; grasp yellow banana; '
        'transport yellow banana>plate; place yellow banana>plate; release yellow banana',
    ),
    (
        '打开冰箱，把红色苹果放进冰箱，然后关上冰箱',
        'perceive; locate fridge; open fridge; locate red apple; grasp red apple; '
        'transport red apple>fridge; '
        'place red apple>fridge; release red apple; close fridge',
    ),
]


@pytest.mark.parametrize('instruction,expected', TABLE)
def test_rule_plans(instruction, expected):
    plan = RulePlanner().plan(instruction)
    assert compact(plan) == expected
    assert plan.source == 'rules'


@pytest.mark.parametrize(
    'instruction,match',
    [
        ('', 'empty'),
        ('   ', 'empty'),
        ('what is the weather today', 'no known skill'),
        ('dance for me', 'no known skill'),
        ('pick up the unicorn', 'unknown object'),
        ('put it in the fridge', 'refers to nothing'),
        ('x' * (MAX_INSTRUCTION + 1), 'longer than'),
        ('今天天气怎么样', 'no known skill'),
        ('把独角兽放进冰箱', 'unknown object'),
    ],
)
def test_rule_planner_refuses_with_a_reason(instruction, match):
    with pytest.raises(PlanError, match=match):
        RulePlanner().plan(instruction)


def test_table_is_large_enough():
    assert (
        len(TABLE) >= 30 and sum(any('\u4e00' <= c <= '\u9fff' for c in i) for i, _ in TABLE) >= 8
    )


@pytest.mark.parametrize(
    'doc,match',
    [
        ({}, 'exactly one key'),
        ({'subtasks': []}, 'non-empty'),
        ({'subtasks': [{'skill': 'fly', 'object': None, 'destination': None}]}, 'not one of'),
        (
            {'subtasks': [{'skill': 'grasp', 'object': None, 'destination': None}]},
            'needs an object',
        ),
        (
            {
                'subtasks': [
                    {
                        'skill': 'place',
                        'object': {'class': 'apple', 'color': ''},
                        'destination': None,
                    }
                ]
            },
            'needs a destination',
        ),
        (
            {'subtasks': [{'skill': 'perceive', 'object': None, 'destination': None}] * 17},
            'max 16',
        ),
        (
            {
                'subtasks': [
                    {
                        'skill': 'grasp',
                        'object': {'class': 'a' * 65, 'color': ''},
                        'destination': None,
                    }
                ]
            },
            'at most 64',
        ),
        (
            {
                'subtasks': [
                    {'skill': 'grasp', 'object': {'class': 'apple'}, 'destination': None, 'x': 1}
                ]
            },
            'only',
        ),
    ],
)
def test_validation_refuses_bad_plans(doc, match):
    with pytest.raises(PlanError, match=match):
        validate_plan(doc, 'llm')


def test_plan_round_trips_through_its_json_and_schema_lists_the_skills():
    plan = RulePlanner().plan('put the red apple in the fridge')
    again = validate_plan(plan.to_json(), 'llm')
    assert again.subtasks == plan.subtasks
    assert (
        PLAN_SCHEMA['properties']['subtasks']['items']['properties']['skill']['enum'][0]
        == 'perceive'
    )
    assert plan.subtasks[3].text() == 'transport the red apple to the fridge'

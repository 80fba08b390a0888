"""Writes docs/architecture.svg, the architecture picture README.md shows.

Standard library only: `python docs/make_architecture_svg.py` rewrites the file beside
this script. Boxes are the stack's parts, arrows carry the topic (or action, service)
between them; the representation tensor itself travels through the cache, never over DDS.
"""

from pathlib import Path
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 1240, 600
COLUMNS = (20, 460, 920)  # left edge of each column
COLUMN_WIDTHS = (220, 240, 300)
ROWS = (50, 230, 410)  # top edge of each row
BOX_HEIGHT = 84

# name: (column, row, title, detail lines, fill)
BOXES = {
    'robot': (0, 0, 'robot', ('cameras, joint states', '(MuJoCo tabletop here)'), '#e8f0fe'),
    'world': (
        1,
        0,
        'world expert',
        ('encodes each observation once', '(ViT, or π0 prefix)'),
        '#fef7e0',
    ),
    'cache': (
        2,
        0,
        'representation cache',
        ('inprocess · shm · CUDA IPC · Mooncake Store', 'key: fingerprint:version, TTL'),
        '#fce8e6',
    ),
    'controller': (
        0,
        1,
        'ros2_control',
        ('joint_trajectory_controller', '(the simulator follows its rules here)'),
        '#e8f0fe',
    ),
    'gate': (
        1,
        1,
        'harness: safety gate',
        ('clamping gate + safety stop', 'latches /safety/stop'),
        '#e6f4ea',
    ),
    'action': (
        2,
        1,
        'action expert (50 Hz)',
        ('prepare once per representation', 'decode a chunk every 20 ms tick'),
        '#fef7e0',
    ),
    'agent': (0, 2, 'robot agent', ('PERCEIVE → PLAN →', 'ACT → OBSERVE'), '#e8f0fe'),
    'tasks': (
        1,
        2,
        'harness: task manager',
        ('LLM planner, rules fallback', 'subtask embedding'),
        '#e6f4ea',
    ),
    'llm': (
        2,
        2,
        'LLM server',
        ('OpenAI-compatible chat completions', '(SGLang; llama.cpp here)'),
        '#f1f3f4',
    ),
}


def _box(name):
    column, row = BOXES[name][0], BOXES[name][1]
    x, y = COLUMNS[column], ROWS[row]
    return x, y, COLUMN_WIDTHS[column], BOX_HEIGHT


def _draw_box(name):
    _, _, title, details, fill = BOXES[name]
    x, y, w, h = _box(name)
    cx = x + w / 2
    parts = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" '
        'stroke="#3c4043" stroke-width="1.2"/>',
        f'<text x="{cx}" y="{y + 26}" class="title">{escape(title)}</text>',
    ]
    for i, line in enumerate(details):
        parts.append(f'<text x="{cx}" y="{y + 48 + 17 * i}" class="detail">{escape(line)}</text>')
    return '\n'.join(parts)


def _arrow(points, label, label_at, anchor='middle', dashed=False):
    path = ' '.join(f'{x},{y}' for x, y in points)
    dash = ' stroke-dasharray="5,4"' if dashed else ''
    lines = label if isinstance(label, tuple) else (label,)
    text = ''.join(
        f'<text x="{label_at[0]}" y="{label_at[1] + 14 * i}" class="label" '
        f'text-anchor="{anchor}">{escape(line)}</text>'
        for i, line in enumerate(lines)
    )
    return (
        f'<polyline points="{path}" fill="none" stroke="#3c4043" stroke-width="1.4"{dash} '
        f'marker-end="url(#head)"/>\n{text}'
    )


def _edges():
    rx, ry, rw, rh = _box('robot')
    wx, wy, ww, wh = _box('world')
    cx, cy, cw, ch = _box('cache')
    kx, ky, kw, kh = _box('controller')
    gx, gy, gw, gh = _box('gate')
    ax, ay, aw, ah = _box('action')
    tx, ty, tw, th = _box('tasks')
    lx, ly, lw, lh = _box('llm')
    mx, my, mw, mh = _box('agent')
    return [
        _arrow(
            [(rx + rw, ry + 42), (wx, wy + 42)], '/camera/image_raw', ((rx + rw + wx) / 2, ry + 34)
        ),
        _arrow(
            [(wx + ww, wy + 42), (cx, cy + 42)],
            ('put: the tensor', '(zero-copy)'),
            ((wx + ww + cx) / 2, wy + 20),
        ),
        _arrow(
            [(cx + cw - 120, cy + ch), (cx + cw - 120, ay)],
            ('read: version,', 'TTL, seqlock'),
            (cx + cw - 112, cy + ch + 40),
            anchor='start',
        ),
        _arrow(
            [(wx + ww, wy + ch - 10), (ax + 40, ay)],
            ('/world_expert/', 'representation (descriptor)'),
            (wx + ww + 90, wy + wh + 36),
            anchor='end',
        ),
        _arrow(
            [
                (rx + 150, ry),
                (rx + 150, 20),
                (WIDTH - 8, 20),
                (WIDTH - 8, ay + 42),
                (ax + aw, ay + 42),
            ],
            '/joint_states (the world expert and the gate read it too)',
            (WIDTH / 2, 15),
        ),
        _arrow(
            [(ax, ay + 42), (gx + gw, gy + 42)],
            '/action_expert/raw_chunk',
            ((ax + gx + gw) / 2, ay + 34),
        ),
        _arrow(
            [(gx, gy + 42), (kx + kw, ky + 42)],
            '/arm_controller/joint_trajectory',
            ((gx + kx + kw) / 2, gy + 34),
        ),
        _arrow(
            [(kx + 60, ky), (rx + 60, ry + rh)],
            ('setpoints', '(cubic)'),
            (kx + 68, ky - 60),
            anchor='start',
        ),
        _arrow(
            [(mx + mw, my + 30), (tx, ty + 30)],
            '/harness/execute_task',
            ((mx + mw + tx) / 2, my + 22),
        ),
        _arrow(
            [(mx + mw, my + 62), (tx, ty + 62)],
            '/perceived_objects',
            ((mx + mw + tx) / 2, my + 54),
        ),
        _arrow(
            [(tx + tw, ty + 10), (ax + 40, ay + ah)],
            '/harness/active_subtask',
            (tx + tw + 205, ty - 58),
            anchor='start',
        ),
        _arrow(
            [(tx + 60, ty), (gx + 60, gy + gh)],
            'harness/hold',
            (tx + 68, ty - 40),
            anchor='start',
        ),
        _arrow(
            [(tx + tw, ty + 62), (lx, ly + 62)],
            'JSON-schema plan',
            ((tx + tw + lx) / 2, ty + 54),
            dashed=True,
        ),
    ]


def svg() -> str:
    caption = (
        'A fleet: one world expert and cache serve every robot; each robot has its own '
        'action expert, safety gate and task manager under /robot<k>/.'
    )
    return '\n'.join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif">',
            '<title>Mooncake-SG architecture</title>',
            '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
            'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            'fill="#3c4043"/></marker></defs>',
            '<style>.title{font-size:15px;font-weight:bold;text-anchor:middle;fill:#202124}'
            '.detail{font-size:12px;text-anchor:middle;fill:#3c4043}'
            '.label{font-size:11px;font-family:Menlo,Consolas,monospace;fill:#1a4d8f}'
            '.caption{font-size:13px;fill:#3c4043}</style>',
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
            *(_draw_box(name) for name in BOXES),
            *_edges(),
            f'<text x="20" y="{HEIGHT - 46}" class="caption">{escape(caption)}</text>',
            f'<text x="20" y="{HEIGHT - 24}" class="caption">'
            + escape(
                'Arrows: ROS 2 topics, the ExecuteTask action and the hold service; dashed: '
                'HTTP. The tensor stays in the cache, only its descriptor travels over DDS.'
            )
            + '</text>',
            '</svg>',
            '',
        ]
    )


def main():
    out = Path(__file__).with_name('architecture.svg')
    out.write_text(svg(), encoding='utf-8')
    print(f'wrote {out}')


if __name__ == '__main__':
    main()

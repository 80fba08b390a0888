"""Security basics that hold for the whole source tree, checked on its syntax tree.

Nothing received (messages, shared memory, Redis, LLM replies, datasets, weights) may
go through code-executing deserialisation: no pickle/marshal/shelve/dill, no
torch.load (weights are safetensors, verified against their manifest first), no
np.load with allow_pickle=True, no yaml.load without a safe loader, no eval/exec.
"""

import ast
import os

from wam_core.common.paths import workspace_root

ROOT = workspace_root()
TREES = ('src', 'bench', 'scripts', 'launch')
FORBIDDEN_MODULES = {
    'pickle',
    'cPickle',
    '_pickle',
    'marshal',
    'shelve',
    'dill',
    'cloudpickle',
    'joblib',
}


def _sources():
    for tree in TREES:
        yield from _walk(os.path.join(ROOT, tree))


def _walk(top):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ('test', 'build', 'install', '__pycache__')]
        for f in files:
            if f.endswith('.py'):
                yield os.path.join(root, f)


def _problems(path):
    tree = ast.parse(open(path, encoding='utf-8').read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split('.')[0] in FORBIDDEN_MODULES]
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or '').split('.')[0] in FORBIDDEN_MODULES
        ):
            out.append(node.module)
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', '')
            owner = getattr(f.value, 'id', '') if isinstance(f, ast.Attribute) else ''
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(f, ast.Name) and f.id in ('eval', 'exec'):
                out.append(name)
            if owner == 'torch' and name == 'load':
                out.append('torch.load')
            if owner in ('np', 'numpy') and name == 'load':
                ap = kw.get('allow_pickle')
                if not (isinstance(ap, ast.Constant) and ap.value is False):
                    out.append('np.load without allow_pickle=False')
            if owner == 'yaml' and name in ('load', 'load_all', 'unsafe_load', 'full_load'):
                out.append(f'yaml.{name}')
    return out


def test_the_scan_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text(
        'import pickle\nimport numpy as np\nimport yaml, torch\n'
        'np.load("x")\nyaml.load(s)\ntorch.load("w")\neval("1")\n'
    )
    assert len(_problems(str(bad))) == 5


def test_no_code_executing_deserialisation_in_the_sources():
    files = list(_sources())
    assert len(files) > 30
    found = {p: _problems(p) for p in files}
    assert {p: v for p, v in found.items() if v} == {}

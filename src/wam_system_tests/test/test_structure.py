"""The workspace's architecture, checked: who may import whom, and what nobody does.

- the simulator and the learning code are ROS-free; the nodes that serve models load
  neither MuJoCo, the simulator nor the training code (checked in a fresh interpreter,
  so transitive imports count);
- no file edits ``sys.path`` or finds the workspace from the current directory;
- no benchmark, drill, script or test reads a diagnostic key/value label: they read the
  typed statuses (``msg.values`` of a received DiagnosticStatus is never loaded).
"""

import ast
import json
import os
import subprocess
import sys

import pytest

from wam_core.common.paths import workspace_root

ROOT = workspace_root()
SERVING_NODES = ('world_expert_node.node', 'action_expert_node.node', 'harness_node.node')
ROS = ('rclpy', 'wam_util', 'diagnostic_updater', 'wam_interfaces', 'builtin_interfaces')


def _python_files(*trees):
    for tree in trees:
        for root, dirs, files in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = [d for d in dirs if d not in ('build', 'install', 'log', '__pycache__')]
            yield from (os.path.join(root, f) for f in files if f.endswith('.py'))


def _tree(path):
    with open(path, encoding='utf-8') as fh:
        return ast.parse(fh.read(), path)


def _imports(path):
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


@pytest.mark.parametrize('package', ['wam_sim', 'wam_learning'])
def test_the_simulator_and_the_learning_code_are_ros_free(package):
    files = list(_python_files(f'src/{package}/{package}'))
    assert files
    offenders = [
        (os.path.relpath(p, ROOT), m)
        for p in files
        for m in _imports(p)
        if m.split('.')[0] in ROS or m.split('.')[0].endswith(('_msgs', '_srvs'))
    ]
    assert offenders == []


def test_nodes_that_serve_models_load_neither_mujoco_nor_the_simulator_nor_training():
    probe = (
        'import importlib, json, sys\n'
        f'for m in {SERVING_NODES!r}: importlib.import_module(m)\n'
        'print(json.dumps(sorted({n.split(".")[0] for n in sys.modules})))\n'
    )
    out = subprocess.run(
        [sys.executable, '-c', probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {'world_expert_node', 'action_expert_node', 'harness_node', 'torch'} <= loaded
    assert loaded & {'mujoco', 'wam_sim', 'wam_learning'} == set()


def test_no_node_imports_a_concrete_model_class():
    # the nodes load experts through wam_core.models.registry, by the model's type
    concrete = ('wam_core.models.world_expert', 'wam_core.models.action_expert')
    nodes = ('world_expert_node', 'action_expert_node', 'harness_node', 'robot_agent')
    files = [p for n in nodes for p in _python_files(f'src/{n}/{n}')]
    assert files
    offenders = [
        (os.path.relpath(p, ROOT), m) for p in files for m in _imports(p) if m in concrete
    ]
    assert offenders == []


def _edits_sys_path(tree) -> bool:
    for node in ast.walk(tree):
        target = (
            node.func.value
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            else None
        )
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t for t in targets if isinstance(t, ast.Attribute)), None)
        if (
            isinstance(target, ast.Attribute)
            and target.attr == 'path'
            and isinstance(target.value, ast.Name)
            and target.value.id == 'sys'
        ):
            return True
    return False


def _uses_cwd(tree) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = getattr(node.func.value, 'id', '')
            if (owner, node.func.attr) in (('os', 'getcwd'), ('Path', 'cwd')):
                return True
    return False


def test_no_file_edits_sys_path_or_finds_the_workspace_from_the_current_directory():
    files = list(_python_files('src', 'bench', 'scripts', 'launch'))
    assert len(files) > 50
    assert [os.path.relpath(p, ROOT) for p in files if _edits_sys_path(_tree(p))] == []
    assert [os.path.relpath(p, ROOT) for p in files if _uses_cwd(_tree(p))] == []


def test_the_sys_path_and_cwd_checks_find_what_they_look_for():
    assert _edits_sys_path(ast.parse('import sys\nsys.path.insert(0, "x")'))
    assert _edits_sys_path(ast.parse('import sys\nsys.path += ["x"]'))
    assert _uses_cwd(ast.parse('import os\nos.getcwd()'))
    assert not _edits_sys_path(ast.parse('import os\nos.path.join("a", "b")'))


def _reads_key_values(tree) -> bool:
    """``x.values`` loaded as a field (not called like dict.values()): a DiagnosticStatus's
    key/values. Building a status (``values=[...]``, ``st.values = [...]``) is fine."""
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == 'values'
        and isinstance(n.ctx, ast.Load)
        and id(n) not in calls
        for n in ast.walk(tree)
    )


# The diagnostics module's own unit test checks the labels it writes, by design.
LABEL_TESTS_OF_THE_FORMATTER = {os.path.join('src', 'wam_util', 'test', 'test_diagnostics.py')}


def test_no_benchmark_drill_script_or_test_reads_a_diagnostic_label():
    readers = list(_python_files('bench', 'scripts', 'src/wam_system_tests'))
    readers += [p for p in _python_files('src') if f'{os.sep}test{os.sep}' in p]
    offenders = {
        os.path.relpath(p, ROOT) for p in set(readers) if _reads_key_values(_tree(p))
    } - LABEL_TESTS_OF_THE_FORMATTER
    assert offenders == set()
    # nor does the demo's monitor keep them (it keeps each status's level and message)
    assert not _reads_key_values(_tree(os.path.join(ROOT, 'src/robot_agent/robot_agent/stack.py')))


def test_the_label_check_finds_what_it_looks_for():
    assert _reads_key_values(ast.parse('d = {kv.key: kv.value for kv in st.values}'))
    assert not _reads_key_values(ast.parse('n = sum(counts.values())\nst.values = []'))

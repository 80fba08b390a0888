"""wam_core is the ROS-free core: subpackages only, and none of them imports ROS, MuJoCo,
the simulator, the training code or the nodes (checked on the syntax tree)."""

import ast
import pathlib

import wam_core

ROOT = pathlib.Path(wam_core.__file__).parent
SUBPACKAGES = {
    'agent',
    'cache',
    'common',
    'control',
    'models',
    'planning',
    'releases',
    'serving',
}
# top-level modules wam_core may never import: ROS and its messages, the simulator and
# its physics engine, the learning code, the glue and the nodes
FORBIDDEN = {
    'rclpy',
    'rcl_interfaces',
    'builtin_interfaces',
    'launch',
    'launch_ros',
    'rosidl_runtime_py',
    'diagnostic_updater',
    'mujoco',
    'wam_sim',
    'wam_learning',
    'wam_util',
    'wam_interfaces',
    'wam_system_tests',
    'world_expert_node',
    'action_expert_node',
    'harness_node',
    'robot_agent',
}


def _forbidden(module: str) -> bool:
    top = module.split('.')[0]
    return top in FORBIDDEN or top.endswith(('_msgs', '_srvs'))


def imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_the_top_level_holds_only_subpackages():
    modules = sorted(p.name for p in ROOT.glob('*.py'))
    packages = {p.name for p in ROOT.iterdir() if (p / '__init__.py').exists()}
    assert modules == ['__init__.py'] and packages == SUBPACKAGES, (modules, packages)
    for name in SUBPACKAGES:  # each says what lives there and what it may import
        doc = ast.get_docstring(ast.parse((ROOT / name / '__init__.py').read_text()))
        assert doc and 'import' in doc, name


def test_wam_core_never_imports_ros_the_simulator_or_training():
    offenders = [
        f'{p.relative_to(ROOT)}: {m}'
        for p in ROOT.rglob('*.py')
        for m in imports(p)
        if _forbidden(m)
    ]
    assert offenders == []


def test_the_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text(
        'import rclpy\nfrom sensor_msgs.msg import Image\nimport mujoco\nimport numpy\n'
    )
    assert [m for m in imports(bad) if _forbidden(m)] == ['rclpy', 'sensor_msgs.msg', 'mujoco']

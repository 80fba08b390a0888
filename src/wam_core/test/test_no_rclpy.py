import ast
import pathlib

import wam_core


def test_wam_core_never_imports_rclpy():
    root = pathlib.Path(wam_core.__file__).parent
    offenders = []
    for path in root.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f'{path.name}: {n}' for n in names if n.split('.')[0] == 'rclpy']
    assert offenders == []

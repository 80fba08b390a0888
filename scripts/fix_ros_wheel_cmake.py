#!/usr/bin/env python3
"""Point the ROS 2 PyPI wheels' baked-in Python include paths at this interpreter.

The kilted wheels are built under manylinux, so their `*Export.cmake` files name
/opt/python/cp311-cp311/... as include directories. CMake refuses imported targets
with non-existent include paths, which breaks building any message package
(wam_interfaces) against them. Rewrite those paths to this Python's include dir and
numpy's. Idempotent: files already fixed are left alone.
"""

import pathlib
import re
import sys
import sysconfig

import numpy


def main(prefix: str) -> int:
    py_inc = sysconfig.get_paths()['include']
    np_inc = numpy.get_include()
    # numpy's include dir first: it is the longer, more specific path.
    numpy_pat = re.compile(
        r'/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/(_core/)?include'
    )
    python_pat = re.compile(r'/opt/python/cp3\d+-cp3\d+/include/python3\.\d+')
    changed = 0
    for path in pathlib.Path(prefix, 'share').glob('*/cmake/*Export.cmake'):
        text = path.read_text()
        if '/opt/python/' not in text:
            continue
        new = python_pat.sub(py_inc, numpy_pat.sub(np_inc, text))
        if new != text:
            path.write_text(new)
            changed += 1
    print(f'fix_ros_wheel_cmake: rewrote {changed} Export.cmake file(s) under {prefix}/share')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.prefix))

"""Write a seeded π0 model directory, or seal one a team filled.

    python -m wam_core.models.pi0 --size tiny|base --views front,wrist --out DIR [--seed N]
    python -m wam_core.models.pi0 --seal DIR --serving serving.json --version V [--name N]

The first writes a directory that loads with no network (random weights: docs/pi0.md).
The second writes DIR's manifest: the sha256 of every file and the serving block read
from serving.json (the robot's cameras per image slot, joints per dimension, units,
absolute or delta, control period; see ``wam_core.models.pi0.serving``). Then check the
pair with ``python -m wam_core.models.check DIR DIR`` and serve it.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..contract import ContractError
from .write import SIZES, seal, write_pi0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog='python -m wam_core.models.pi0',
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument('--size', choices=sorted(SIZES), help='write a seeded model of this size')
    ap.add_argument('--views', default='front,wrist', help='cameras, one image slot each')
    ap.add_argument('--out', help='the directory to write')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--seal', metavar='DIR', help='write the manifest of this directory')
    ap.add_argument('--serving', help='--seal: the serving block (JSON)')
    ap.add_argument('--version', help='--seal: the model version representations are keyed by')
    ap.add_argument('--name', help='--seal: the model name (default: the directory name)')
    args = ap.parse_args(argv)
    if args.seal:
        if not (args.serving and args.version):
            ap.error('--seal needs --serving and --version')
        try:
            with open(args.serving, encoding='utf-8') as fh:
                block = json.load(fh)
            m = seal(
                args.seal, block, args.name or args.seal.rstrip('/').split('/')[-1], args.version
            )
        except (OSError, ValueError, ContractError) as exc:
            print(f'cannot seal {args.seal}: {exc}', file=sys.stderr)
            return 2
        print(f'sealed {args.seal}: {len(m.files)} files, version {m.version}')
        return 0
    if not (args.size and args.out):
        ap.error('give --size and --out to write a model (or --seal DIR)')
    views = tuple(v.strip() for v in args.views.split(',') if v.strip())
    try:
        info = write_pi0(args.out, args.size, views, args.seed)
    except ValueError as exc:
        print(f'cannot write the model: {exc}', file=sys.stderr)
        return 2
    print(
        f'pi0 {args.size} ({", ".join(views)}) written to {info["dir"]}: version '
        f'{info["version"]}, {info["parameters"] / 1e6:.1f} M parameters'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())

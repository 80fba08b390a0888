"""The documentation's references, checked against the repository (no ROS needed).

README.md and docs/*.md name make targets, ``python -m`` modules, markdown links (with
their #anchors) and repository paths. Each must exist, so a renamed target, module or
file fails here instead of in a reader's terminal. Modules are located as files under
src/*/ or bench/, never imported.
"""

import re
from pathlib import Path

import pytest


def _repository_root() -> Path:
    """The directory holding the Makefile, walking up from this file."""
    for directory in Path(__file__).resolve().parents:
        if (directory / 'Makefile').is_file():
            return directory
    raise RuntimeError(f'no Makefile above {__file__}')


ROOT = _repository_root()
DOCUMENTS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]

# Paths the documents name that a fresh clone does not hold: each is written at run time
# (the .gitignore lists them), so it may be absent.
GENERATED = (
    '.venv/',  # scripts/setup.sh creates the virtual environment
    'build/',  # colcon build
    'install/',  # colcon build
    'log/',  # colcon
    'bench/report.json',  # make bench, make eval, the drills
    'bench/report.md',  # python bench/render_report.py
    'bench/faults_timeline.json',  # make faults
    'bench/releases_steps.json',  # make releases
    'datasets/',  # make data, make dagger
    'models/llm/',  # scripts/setup_llm.sh (the GGUF for the local LLM server)
    'models/pi0_tiny/',  # make demo MODEL=pi0, written on first use
    'models/pi0_bench/',  # bench/pi0.py
    'releases/',  # the release registry's default directory
)
# Modules named after `python -m` that are not this repository's: the test runner the
# requirements install, and SGLang's server, which belongs to the production GPU host the
# documents describe (it is not installable here).
EXTERNAL_MODULES = {'pytest', 'sglang.launch_server'}
PLACEHOLDERS = ('<', '*', '{', '$')
# fenced blocks, also indented under a list item
FENCE = re.compile(r'^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$', re.MULTILINE | re.DOTALL)
# inline code may wrap onto the next line, never across a blank one
INLINE_CODE = re.compile(r'`((?:[^`\n]|\n(?![ \t]*\n))+)`')
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
HEADING = re.compile(r'^#{1,6}\s+(.+?)\s*#*\s*$', re.MULTILINE)
MAKE = re.compile(r'(?<![\w./-])make((?:\s+[^\s|;&#]+)+)')
PYTHON_MODULE = re.compile(r'(?<![\w./-])python3?\s+-m\s+([A-Za-z_][\w.]*)')


def _read(path: Path) -> str:
    return path.read_text(encoding='utf-8')


def _code(text: str) -> list[str]:
    """Fenced blocks and inline code spans: where commands and paths are written."""
    fenced = [m.group(0) for m in FENCE.finditer(text)]
    return fenced + INLINE_CODE.findall(FENCE.sub('', text))


def _prose(text: str) -> str:
    """The text without code, so a link or heading inside code is not taken for one."""
    return INLINE_CODE.sub('``', FENCE.sub('', text))


def _makefile_targets() -> set[str]:
    text = _read(ROOT / 'Makefile')
    names = re.findall(r'^([A-Za-z0-9_.-]+)\s*:(?!=)', text, re.MULTILINE)
    return {n for n in names if not n.startswith('.')}  # .PHONY is no target


def _make_targets(code: str) -> list[str]:
    targets = []
    for match in MAKE.finditer(code):
        for word in match.group(1).split():
            if word.startswith('-') or '=' in word:
                continue  # an option or a VAR=value before the target
            targets.append(word.strip('`\'",.;:()'))
            break
    return targets


def _module_exists(module: str) -> bool:
    parts = module.split('.')
    bases = [p for p in (ROOT / 'src').iterdir() if p.is_dir()] + [ROOT]
    for base in bases:
        stem = base.joinpath(*parts)
        if stem.with_suffix('.py').is_file() or (stem / '__init__.py').is_file():
            return True
    # a script run as a module from bench/
    return (ROOT / 'bench').joinpath(*parts).with_suffix('.py').is_file()


def _top_level() -> set[str]:
    names = {p.name for p in ROOT.iterdir() if not p.name.startswith('.git')}
    return names | {g.split('/')[0] for g in GENERATED}


def _path_candidates(code: str) -> list[str]:
    """Words of a code span that look like a repository path: a directory part whose first
    component is an entry of the repository's root (config/wam.yaml, bench/fleet.py, src/...).
    A path inside someone else's directory (a model's meta/stats.json) is not one."""
    top = _top_level()
    found = []
    for word in code.split():
        word = word.strip('`\'",;()[]')
        word = word.rstrip('.:')
        if '/' not in word or any(p in word for p in PLACEHOLDERS):
            continue
        if word.startswith(('/', '~', '-', 'http', '#')) or '://' in word or '=' in word:
            continue  # absolute paths, topics, URLs, options, VAR=value
        if ':' in word:
            continue  # ROS remaps (node:param:=value), PYTHONPATH lists
        if word.split('/')[0] in top:
            found.append(word)
    return found


def _path_exists(path: str) -> bool:
    if any(path == g.rstrip('/') or path.startswith(g) for g in GENERATED):
        return True
    return (ROOT / path).exists()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link's text only
    return re.sub(r'[^\w\- ]', '', text.strip().lower()).replace(' ', '-')


def _anchors(path: Path) -> set[str]:
    anchors, seen = set(), {}
    for heading in HEADING.findall(FENCE.sub('', _read(path))):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f'{slug}-{count}')
    return anchors


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize('document', DOCUMENTS, ids=_name)
def test_every_make_target_exists(document):
    targets = _makefile_targets()
    named = [t for code in _code(_read(document)) for t in _make_targets(code)]
    assert sorted({t for t in named if t not in targets}) == []


@pytest.mark.parametrize('document', DOCUMENTS, ids=_name)
def test_every_python_module_exists(document):
    modules = {m for code in _code(_read(document)) for m in PYTHON_MODULE.findall(code)}
    missing = [m for m in modules - EXTERNAL_MODULES if not _module_exists(m)]
    assert sorted(missing) == []


@pytest.mark.parametrize('document', DOCUMENTS, ids=_name)
def test_every_relative_link_resolves(document):
    broken = []
    for target in LINK.findall(_prose(_read(document))):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition('#')
        resolved = (document.parent / path).resolve() if path else document
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == '.md' and anchor not in _anchors(resolved):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize('document', DOCUMENTS, ids=_name)
def test_every_repository_path_exists(document):
    paths = {p for code in _code(_read(document)) for p in _path_candidates(code)}
    assert sorted(p for p in paths if not _path_exists(p)) == []


def test_the_checks_find_what_they_look_for():
    assert _make_targets('make demo MODEL=pi0') == ['demo']
    assert _make_targets('make REPEAT=20 faults') == ['faults']
    assert 'demo' in _makefile_targets()
    assert not {'SHELL', '.PHONY'} & _makefile_targets()
    assert _module_exists('wam_core.cache.freshness')
    assert _module_exists('wam_core.cache')
    assert not _module_exists('wam_core.cache.no_such_module')
    assert _path_candidates('python bench/fleet.py --robots 2') == ['bench/fleet.py']
    assert _path_candidates('/camera/image_raw sensor_msgs/Image') == []
    assert _path_candidates('/dev/shm/<shm_name>_<robot> models/<name>') == []
    assert _path_exists('config/wam.yaml') and _path_exists('bench/report.md')
    assert _path_candidates('meta/stats.json sim/visible_objects') == []
    assert not _path_exists('config/no_such_file.yaml')
    assert _slug('Figures (make bench, this 2-core machine)') == (
        'figures-make-bench-this-2-core-machine'
    )
    assert _prose('see `[x](nowhere.md)`') == 'see ``'

"""Model manifests: name, version and the sha256 of every file, checked before load.

A model directory holds ``manifest.json`` next to the files it lists. Loading code
calls ``verify_manifest`` first; a missing, extra-size or tampered file raises
``ManifestError`` naming the file, so a corrupted or swapped model never runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

MANIFEST_NAME = 'manifest.json'
_CHUNK = 1 << 20


class ManifestError(RuntimeError):
    """The model directory does not match its manifest."""


@dataclass
class Manifest:
    name: str
    version: str
    files: dict[str, str]  # relative path -> sha256 hex
    extra: dict[str, object] = field(default_factory=dict)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as fh:
        while True:
            block = fh.read(_CHUNK)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def write_manifest(
    model_dir: str, name: str, version: str, extra: dict[str, object] | None = None
) -> Manifest:
    """Hash every file in ``model_dir`` (except the manifest) and write manifest.json."""
    files = {}
    for root, _dirs, names in os.walk(model_dir):
        for n in sorted(names):
            full = os.path.join(root, n)
            rel = os.path.relpath(full, model_dir)
            if rel == MANIFEST_NAME:
                continue
            files[rel] = sha256_file(full)
    manifest = Manifest(
        name=name, version=version, files=dict(sorted(files.items())), extra=dict(extra or {})
    )
    with open(os.path.join(model_dir, MANIFEST_NAME), 'w', encoding='utf-8') as fh:
        json.dump(
            {'name': name, 'version': version, 'files': manifest.files, 'extra': manifest.extra},
            fh,
            indent=2,
            sort_keys=True,
        )
        fh.write('\n')
    return manifest


def read_manifest(model_dir: str) -> Manifest:
    path = os.path.join(model_dir, MANIFEST_NAME)
    try:
        with open(path, encoding='utf-8') as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise ManifestError(f'no {MANIFEST_NAME} in model directory {model_dir!r}') from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f'unreadable manifest {path!r}: {exc}') from None
    try:
        name, version, files = doc['name'], doc['version'], doc['files']
    except (KeyError, TypeError):
        raise ManifestError(f'manifest {path!r} lacks name/version/files') from None
    if not (
        isinstance(name, str)
        and isinstance(version, str)
        and version
        and isinstance(files, dict)
        and files
    ):
        raise ManifestError(f'manifest {path!r} has an empty or malformed name/version/files')
    return Manifest(
        name=name, version=version, files=dict(files), extra=dict(doc.get('extra') or {})
    )


def verify_manifest(model_dir: str) -> Manifest:
    """Check every listed file exists and matches its sha256; return the manifest."""
    manifest = read_manifest(model_dir)
    root = os.path.realpath(model_dir)
    for rel, expected in manifest.files.items():
        full = os.path.realpath(os.path.join(model_dir, rel))
        if not full.startswith(root + os.sep):
            raise ManifestError(f'manifest entry {rel!r} points outside {model_dir!r}')
        if not os.path.isfile(full):
            raise ManifestError(
                f'model file {rel!r} listed in the manifest is missing from {model_dir!r}'
            )
        actual = sha256_file(full)
        if actual != expected:
            raise ManifestError(
                f'model file {rel!r} in {model_dir!r} fails its sha256 check '
                f'(expected {expected[:12]}…, got {actual[:12]}…): '
                'refusing to load a tampered or corrupt model'
            )
    return manifest

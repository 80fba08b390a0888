"""The release registry: which world expert goes with which action expert, and what each
release did, in a SQLite database (stdlib ``sqlite3``).

A *release* is a world-expert directory and an action-expert directory served together:
their types, versions and manifest digests (sha256 of ``manifest.json``, which itself
holds the sha256 of every file), the world version the action expert accepts, the robot
description it was trained for (its name and the sha256 of its URDF), who registered it,
when and why, and its state:

    registered -> canary -> live -> retired
                      \\-> rolled_back      live -> rolled_back (a manual rollback)

Registering verifies both manifests, checks that the action expert commands the robot's
joints and accepts the world expert's version, and runs the conformance kit
(:mod:`wam_core.models.check`) on the pair: a pair that fails any of it is refused with
the reason and nothing is written. Every state change appends a row to ``audit``; the
database itself refuses to update or delete an audit row (triggers), so the history
cannot be rewritten through this module or any other client.

At most one release is ``live``: promoting one retires the one before it. A rollback of
the live release makes the release that was live before it live again.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import sqlite3
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from ..models.manifest import MANIFEST_NAME, ManifestError, verify_manifest

REGISTERED, CANARY, LIVE, RETIRED, ROLLED_BACK = (
    'registered',
    'canary',
    'live',
    'retired',
    'rolled_back',
)
STATES = (REGISTERED, CANARY, LIVE, RETIRED, ROLLED_BACK)
# state -> the states it may change to
TRANSITIONS = {
    REGISTERED: (CANARY, LIVE, RETIRED),
    CANARY: (LIVE, ROLLED_BACK),
    LIVE: (RETIRED, ROLLED_BACK),
    RETIRED: (LIVE, CANARY),  # a rollback target; or tried again on a canary
    ROLLED_BACK: (CANARY, LIVE, RETIRED),  # tried again (after the cause is understood)
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    name TEXT PRIMARY KEY,
    world_dir TEXT NOT NULL,
    action_dir TEXT NOT NULL,
    world_type TEXT NOT NULL,
    action_type TEXT NOT NULL,
    world_version TEXT NOT NULL,
    action_version TEXT NOT NULL,
    world_digest TEXT NOT NULL,
    action_digest TEXT NOT NULL,
    accepted_world_version TEXT NOT NULL,
    robot_name TEXT NOT NULL,
    robot_digest TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    robots TEXT NOT NULL DEFAULT '[]',
    conformance TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    release TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    robots TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;
"""


class RegistryError(RuntimeError):
    """A request the registry refuses (an unknown release, a state change not allowed, a
    pair that fails its checks, another robot); the message says why."""


@dataclass(frozen=True)
class RobotIdentity:
    """Which robot a release is for: the URDF's robot name and the sha256 of its text."""

    name: str
    digest: str
    joint_names: tuple[str, ...] = ()

    @classmethod
    def of(cls, description) -> RobotIdentity:
        """From a :class:`~wam_core.common.robot.RobotDescription`."""
        text = description.urdf or ''
        try:
            name = ET.fromstring(text).get('name', '') if text else ''
        except ET.ParseError:
            name = ''
        return cls(
            name or 'unnamed',
            hashlib.sha256(text.encode('utf-8')).hexdigest(),
            tuple(description.joint_names),
        )


@dataclass
class Release:
    name: str
    world_dir: str
    action_dir: str
    world_type: str
    action_type: str
    world_version: str
    action_version: str
    world_digest: str
    action_digest: str
    accepted_world_version: str
    robot_name: str
    robot_digest: str
    created_by: str
    created_at: float
    reason: str
    state: str
    robots: list[str] = field(default_factory=list)  # a canary's robots
    conformance: list[dict] = field(default_factory=list)  # the kit's rows at registration

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class AuditRow:
    id: int
    at: float
    release: str
    from_state: str | None
    to_state: str
    robots: list[str]
    actor: str
    reason: str
    detail: dict

    def as_dict(self) -> dict:
        return asdict(self)


def default_db_path() -> str:
    """The release registry a command or a node uses when none is named:
    $WAM_RELEASES_DB, else releases/releases.db in the workspace."""
    from ..common.paths import workspace_root

    return os.environ.get('WAM_RELEASES_DB') or os.path.join(
        workspace_root(), 'releases', 'releases.db'
    )


def look_up(name: str, db: str = '') -> Release:
    """The release ``name`` from the registry at ``db`` (empty: ``default_db_path()``),
    for a node that finds which release it should serve; RegistryError if there is no
    registry there (none is created) or no such release."""
    db = db or default_db_path()
    if not os.path.exists(db):
        raise RegistryError(f'no release registry at {db}')
    try:  # a node's executor asks: a locked or damaged registry is an answer, not a wait
        with Registry(db, timeout_s=1.0) as reg:
            return reg.get(name)
    except RegistryError:
        raise
    except Exception as exc:  # sqlite3.Error, a row the schema no longer fits
        raise RegistryError(f'release registry {db}: {type(exc).__name__}: {exc}') from None


def manifest_digest(model_dir: str) -> str:
    """sha256 of a model directory's manifest.json (which holds every file's sha256)."""
    with open(os.path.join(model_dir, MANIFEST_NAME), 'rb') as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def verify_release_dir(model_dir: str, digest: str) -> None:
    """ManifestError unless ``model_dir`` is what was registered: its manifest's digest and
    every file's sha256 (a directory rewritten after registration is refused)."""
    verify_manifest(model_dir)
    actual = manifest_digest(model_dir)
    if actual != digest:
        raise ManifestError(
            f'{model_dir!r} is not the registered build: manifest sha256 {actual[:12]}…, '
            f'registered {digest[:12]}…'
        )


def default_actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return 'unknown'


def _conformance_kit(world_dir: str, action_dir: str, config: str | None) -> list[dict]:
    from ..models.check import check_dirs

    return [asdict(c) for c in check_dirs(world_dir, action_dir, config)]


class Registry:
    """One SQLite database of releases and their audit trail."""

    def __init__(self, path: str, timeout_s: float = 10.0):
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise RegistryError(f'cannot open the release registry {path!r}: {exc}') from None
        self._db.row_factory = sqlite3.Row

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # reading ------------------------------------------------------------------------
    def get(self, name: str) -> Release:
        row = self._db.execute('SELECT * FROM releases WHERE name = ?', (name,)).fetchone()
        if row is None:
            known = ', '.join(r.name for r in self.list()) or 'none'
            raise RegistryError(f'no release named {name!r} (registered: {known})')
        return _release(row)

    def list(self, state: str | None = None) -> list[Release]:
        if state is not None and state not in STATES:
            raise RegistryError(f'unknown state {state!r} (one of {", ".join(STATES)})')
        q, args = 'SELECT * FROM releases', ()
        if state is not None:
            q, args = q + ' WHERE state = ?', (state,)
        return [_release(r) for r in self._db.execute(q + ' ORDER BY created_at', args)]

    def live(self) -> Release | None:
        rows = self.list(LIVE)
        return rows[0] if rows else None

    def history(self, name: str | None = None) -> list[AuditRow]:
        q, args = 'SELECT * FROM audit', ()
        if name is not None:
            self.get(name)  # an unknown name is an error, not an empty history
            q, args = q + ' WHERE release = ?', (name,)
        return [_audit(r) for r in self._db.execute(q + ' ORDER BY id', args)]

    def previous_live(self, name: str) -> Release | None:
        """The release that was live before ``name`` last became live (a rollback's
        target), if it is still registered and not rolled back."""
        rows = self._db.execute(
            "SELECT id FROM audit WHERE release = ? AND to_state = 'live' ORDER BY id DESC",
            (name,),
        ).fetchone()
        before = rows['id'] if rows else 1 << 62
        for r in self._db.execute(
            "SELECT release FROM audit WHERE to_state = 'live' AND release != ? AND id < ? "
            'ORDER BY id DESC',
            (name, before),
        ):
            rel = self.get(r['release'])
            if rel.state in (RETIRED, LIVE):
                return rel
        return None

    # changing -----------------------------------------------------------------------
    def register(
        self,
        name: str,
        world_dir: str,
        action_dir: str,
        robot,
        reason: str,
        actor: str | None = None,
        config: str | None = None,
        conformance: Callable[[str, str, str | None], list[dict]] = _conformance_kit,
    ) -> Release:
        """Verify and record a pair for ``robot`` (a RobotDescription); RegistryError with
        the reason if it is refused. ``config``: the parameter file whose budgets the
        conformance kit applies (default config/wam.yaml)."""
        if not name or len(name) > 100 or not all(c.isalnum() or c in '-_.' for c in name):
            raise RegistryError(
                f'release name {name!r}: 1-100 characters of letters, digits, - _ .'
            )
        if not reason.strip():
            raise RegistryError('say why this release exists (--reason)')
        if self._db.execute('SELECT 1 FROM releases WHERE name = ?', (name,)).fetchone():
            raise RegistryError(f'a release named {name!r} is already registered')
        world_dir, action_dir = os.path.abspath(world_dir), os.path.abspath(action_dir)
        try:
            world_m, action_m = verify_manifest(world_dir), verify_manifest(action_dir)
        except ManifestError as exc:
            raise RegistryError(f'refused: {exc}') from None
        ident = RobotIdentity.of(robot)
        accepted = str(action_m.extra.get('world_version', ''))
        if accepted and accepted != world_m.version:
            raise RegistryError(
                f'refused: the action expert accepts world version {accepted!r}, the world '
                f'expert is version {world_m.version!r}'
            )
        joints = action_m.extra.get('joint_names')
        if joints is not None and tuple(joints) != ident.joint_names:
            raise RegistryError(
                f'refused: the action expert was trained for the joints {list(joints)}, the '
                f'robot {ident.name!r} has {list(ident.joint_names)}'
            )
        rows = conformance(world_dir, action_dir, config)
        failed = [r for r in rows if not r['passed']]
        if failed:
            why = '; '.join(f'{r["name"]}: {r["reason"]}' for r in failed)
            raise RegistryError(f'refused: the conformance kit failed: {why}')
        rel = Release(
            name,
            world_dir,
            action_dir,
            str(world_m.extra.get('type', '')),
            str(action_m.extra.get('type', '')),
            world_m.version,
            action_m.version,
            manifest_digest(world_dir),
            manifest_digest(action_dir),
            accepted or world_m.version,
            ident.name,
            ident.digest,
            actor or default_actor(),
            time.time(),
            reason,
            REGISTERED,
            [],
            rows,
        )
        d = rel.as_dict()
        d['robots'], d['conformance'] = json.dumps(rel.robots), json.dumps(rows)
        with self._transaction():
            cols = ', '.join(d)
            self._db.execute(
                f'INSERT INTO releases ({cols}) VALUES ({", ".join("?" * len(d))})',
                tuple(d.values()),
            )
            self._audit(name, None, REGISTERED, [], rel.created_by, reason, {})
        return rel

    def check_robot(self, name: str, robot) -> Release:
        """The release, or RegistryError if it was registered for another robot."""
        rel = self.get(name)
        ident = RobotIdentity.of(robot)
        if (rel.robot_name, rel.robot_digest) != (ident.name, ident.digest):
            raise RegistryError(
                f'release {name!r} is for robot {rel.robot_name!r} (URDF sha256 '
                f'{rel.robot_digest[:12]}…), not {ident.name!r} ({ident.digest[:12]}…)'
            )
        return rel

    def transition(
        self,
        name: str,
        to_state: str,
        reason: str,
        robots: Iterable[str] = (),
        actor: str | None = None,
        detail: dict | None = None,
    ) -> Release:
        """Change a release's state, with its audit row (RegistryError if not allowed).
        Going live retires the release that was live."""
        if to_state not in STATES:
            raise RegistryError(f'unknown state {to_state!r}')
        robots = list(robots)
        actor = actor or default_actor()
        with self._transaction():  # read and write under one lock: no lost update
            rel = self.get(name)
            if to_state not in TRANSITIONS[rel.state]:
                raise RegistryError(
                    f'release {name!r} is {rel.state}: it cannot become {to_state} '
                    f'(from {rel.state}: {", ".join(TRANSITIONS[rel.state])})'
                )
            if to_state == LIVE:
                for old in self.list(LIVE):
                    self._set(old.name, RETIRED, [])
                    self._audit(old.name, LIVE, RETIRED, [], actor, f'{name} went live', {})
            self._set(name, to_state, robots if to_state == CANARY else [])
            self._audit(name, rel.state, to_state, robots, actor, reason, detail or {})
        return self.get(name)

    @contextlib.contextmanager
    def _transaction(self):
        self._db.execute('BEGIN IMMEDIATE')
        try:
            yield
        except BaseException:
            self._db.execute('ROLLBACK')
            raise
        self._db.execute('COMMIT')

    def _set(self, name: str, state: str, robots: list[str]) -> None:
        self._db.execute(
            'UPDATE releases SET state = ?, robots = ? WHERE name = ?',
            (state, json.dumps(robots), name),
        )

    def _audit(self, name, from_state, to_state, robots, actor, reason, detail) -> None:
        self._db.execute(
            'INSERT INTO audit (at, release, from_state, to_state, robots, actor, reason, '
            'detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
            (
                time.time(),
                name,
                from_state,
                to_state,
                json.dumps(list(robots)),
                actor,
                reason,
                json.dumps(detail, default=str),
            ),
        )


def _release(row: sqlite3.Row) -> Release:
    d = dict(row)
    d['robots'] = json.loads(d['robots'])
    d['conformance'] = json.loads(d['conformance'])
    return Release(**d)


def _audit(row: sqlite3.Row) -> AuditRow:
    d = dict(row)
    d['robots'] = json.loads(d['robots'])
    d['detail'] = json.loads(d['detail'])
    return AuditRow(**d)

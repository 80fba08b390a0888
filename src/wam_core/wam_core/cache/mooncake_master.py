"""The Mooncake Store's master as a component the stack starts, checks and stops.

``mooncake_master`` (from mooncake-transfer-engine-non-cuda) keeps the object index and,
with ``--enable_http_metadata_server``, serves the transfer engine's segment metadata
over HTTP: one process, on the world host. ``start`` launches it bound to the given
loopback or host address; ``wait_ready`` returns once both its RPC port accepts
connections and its metadata server answers; ``stop`` ends it. ``pause``/``resume``
(SIGSTOP/SIGCONT) are for the fault drills.

    python -m wam_core.cache.mooncake_master [--host 127.0.0.2] [--rpc-port 50051]
        [--http-port 8080] [--linger-s 4]     # in the foreground, for a launch file

Run that way, it outlives its clients at a stop: a terminal's Ctrl-C reaches the master
and the world expert at once, and a world expert whose put is in flight when the master
goes waits seconds in the store's client and then aborts in its teardown (seen under
``ros2 launch``: exit code -6). So on SIGINT or SIGTERM it keeps serving until no client
has a segment mounted (the world expert closed its store) or ``--linger-s`` passed (under
the 5 s after which launch escalates to SIGTERM); a SIGTERM during the wait ends it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ..common.process import dying_with_parent, free_port, terminate
from .protocol import CacheError


def master_binary() -> str:
    """The mooncake_master the package installed (beside this interpreter first)."""
    here = os.path.join(os.path.dirname(sys.executable), 'mooncake_master')
    found = here if os.access(here, os.X_OK) else shutil.which('mooncake_master')
    if not found:
        raise CacheError(
            'mooncake_master not found: install mooncake-transfer-engine-non-cuda '
            '(scripts/setup.sh does)'
        )
    return found


class MooncakeMaster:
    def __init__(
        self,
        host: str = '127.0.0.1',
        rpc_port: int = 50051,
        http_port: int = 8080,
        metrics_port: int | None = None,
        log_path: str | None = None,
        client_ttl_s: int = 3,
    ):
        self.host = host
        self.rpc_port = rpc_port
        self.http_port = http_port
        self.metrics_port = metrics_port or free_port(host)
        self.log_path = log_path
        self.client_ttl_s = client_ttl_s
        self.proc: subprocess.Popen | None = None

    @property
    def master_address(self) -> str:
        return f'{self.host}:{self.rpc_port}'

    @property
    def metadata_server(self) -> str:
        return f'http://{self.host}:{self.http_port}/metadata'

    def client_config(self, local_hostname: str, reader_hostname: str, **fields):
        """The ``repr_cache.mooncake`` settings that join this master: a writer at
        ``local_hostname``, readers at ``reader_hostname``; ``fields`` the rest (sizes)."""
        from ..common.config import MooncakeConfig

        return MooncakeConfig(
            master_address=self.master_address,
            metadata_server=self.metadata_server,
            local_hostname=local_hostname,
            reader_hostname=reader_hostname,
            **fields,
        )

    def command(self) -> list[str]:
        return [
            master_binary(),
            f'--rpc_address={self.host}',
            f'--rpc_port={self.rpc_port}',
            '--enable_http_metadata_server=true',
            f'--http_metadata_server_host={self.host}',
            f'--http_metadata_server_port={self.http_port}',
            # every server it runs on the given host, none on 0.0.0.0 (its default for the
            # metadata and metrics servers): a robot network sees only what it is meant to
            f'--metrics_host={self.host}',
            f'--metrics_port={self.metrics_port}',
            # a world expert that died keeps its segment mounted until this passes, and
            # the master keeps placing new objects in it (puts fail with -800 meanwhile):
            # 3 s instead of the default 10 bounds a world-expert restart's recovery
            f'--client_ttl={self.client_ttl_s}',
        ]

    def start(self) -> MooncakeMaster:
        if self.proc is not None and self.proc.poll() is None:
            return self
        out = open(self.log_path, 'ab') if self.log_path else subprocess.DEVNULL
        try:
            # its own session (a terminal's Ctrl-C goes to the stack, which stops it in
            # order), and SIGTERM when its parent dies, even by kill -9: no orphan master
            self.proc = subprocess.Popen(
                dying_with_parent(self.command()),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()  # the child has its own descriptor
        return self

    def ready(self) -> bool:
        """RPC port open and the metadata server answering (404 for an unknown key)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            with socket.create_connection((self.host, self.rpc_port), timeout=0.5):
                pass
        except OSError:
            return False
        try:
            urllib.request.urlopen(f'{self.metadata_server}?key=wam_readiness', timeout=0.5)
        except urllib.error.HTTPError as exc:
            return exc.code == 404  # up: it just has no such key
        except OSError:
            return False
        return True

    def wait_ready(self, timeout: float = 15.0) -> MooncakeMaster:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                raise CacheError(f'mooncake_master exited with {self.proc.returncode}')
            if self.ready():
                return self
            time.sleep(0.05)
        raise CacheError(f'mooncake_master not ready on {self.master_address} in {timeout} s')

    def mounted_bytes(self) -> int | None:
        """The memory its clients lend it (its ``master_total_capacity_bytes`` metric):
        0 once every client that mounted a segment closed; None if it does not answer."""
        try:
            with urllib.request.urlopen(
                f'http://{self.host}:{self.metrics_port}/metrics', timeout=0.5
            ) as reply:
                text = reply.read().decode()
        except OSError:
            return None
        for family in text_string_to_metric_families(text):
            if family.name == 'master_total_capacity_bytes' and family.samples:
                return int(family.samples[0].value)
        return None

    def linger(self, timeout_s: float, signals: set) -> str:
        """Keep serving until no client has a segment mounted, ``timeout_s`` passed, or
        SIGTERM arrives (``signals`` must be blocked); what ended the wait."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            mounted = self.mounted_bytes()
            if mounted is None:
                return 'its metrics do not answer'
            if mounted == 0:
                return 'no client mounted'
            got = signal.sigtimedwait(signals, 0.1)
            if got is not None and got.si_signo == signal.SIGTERM:
                return 'SIGTERM'
        return f'{timeout_s:g} s passed'

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """Abruptly (a crashed master), for the fault drills."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused master cannot exit
        terminate(self.proc)
        self.proc = None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--host', default='127.0.0.1')
    ap.add_argument('--rpc-port', type=int, default=50051)
    ap.add_argument('--http-port', type=int, default=8080)
    ap.add_argument(
        '--linger-s',
        type=float,
        default=4.0,
        help='at a stop, serve at most this long while clients still have segments mounted',
    )
    args = ap.parse_args(argv)
    master = MooncakeMaster(args.host, args.rpc_port, args.http_port).start()
    # blocked after the start: a child inherits the signal mask across exec
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        master.wait_ready()
        print(
            f'mooncake_master ready: rpc {master.master_address}, metadata '
            f'{master.metadata_server}',
            flush=True,
        )
        stop = {signal.SIGINT, signal.SIGTERM}
        signal.sigwait(stop)
        # a second SIGINT (the terminal's and launch's) waits on; a SIGTERM then, which
        # is launch's escalation, does not
        why = master.linger(args.linger_s, stop)
        print(f'mooncake_master stopping: {why}', flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        master.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""CUDA IPC backend: the representation ring in device memory, read in place by other processes.

A world expert on a GPU computes its representation in device memory; the ``shm``
backend would copy it to the host and every action expert would copy it back. Here the
ring's slot data is one ``cudaMalloc`` region on the writer's device, and its CUDA IPC
handle (``cudaIpcGetMemHandle``) is written once into the header of a host shared-memory
segment laid out as the ``shm`` backend's. That segment keeps everything else with the
``shm`` rules: the slot sequence words (seqlock), stamps, fingerprints and versions, mode
0600, reclaimed when its writer died, re-attached when the writer restarts (a new epoch:
a new region and handle). A reader opens the handle once per writer
(``cudaIpcOpenMemHandle``) and reads a slot as a torch tensor on the device, in place: no
device-to-host copy on the read path.

Device memory comes from CuPy's CUDA runtime bindings (``cupy.cuda.runtime``): an exact
``cudaMalloc`` region whose handle names just it (torch's caching allocator hands out
pieces of larger blocks) and the IPC calls; torch sees the region through DLPack. No
CUDA C is written here.

Ordering: the writer's copy into a slot is synchronised before the slot's sequence turns
even; a reader's ``copy_into`` is synchronised before its sequence check; a zero-copy
view's user re-checks ``still_valid`` once its kernels have run, as with ``shm``.

Not run on this machine (no CUDA device): ``CudaMemory``, the only class that calls
CUDA. The protocol around it (header, handle, seqlock, TTL, version, re-attach, crash
reclaim, refusals) is tested on the CPU with a host stand-in for the device memory
(``test_cuda_ipc.py``); the device test skips with "no CUDA device".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from .protocol import CacheError, now_ns, storage_dtype
from .shm import (
    DATA_ON_DEVICE,
    H_DEVICE,
    H_HANDLE_LEN,
    H_HANDLE_OFF,
    HANDLE_BYTES,
    ITEMSIZE,
    ShmRingReader,
    ShmRingWriter,
    _ShmLayout,
)


def _torch():
    import torch

    return torch


def _as_torch(array: np.ndarray, dtype: str):
    """A host array in the ring's storage words as a torch tensor of ``dtype``."""
    return _torch().from_numpy(np.ascontiguousarray(array)).view(torch_dtype(dtype))


def torch_dtype(name: str):
    torch = _torch()
    return {'float32': torch.float32, 'float16': torch.float16, 'bfloat16': torch.bfloat16}[name]


class DeviceMemory(Protocol):
    """One region of device memory that another process can open by its handle."""

    nbytes: int

    def handle(self) -> bytes: ...
    def tensor(self): ...  # the whole region as a 1-D uint8 torch tensor
    def synchronize(self) -> None: ...  # the copies issued so far have completed
    def close(self) -> None: ...


def cuda_unavailable(device: int = 0) -> str:
    """Why the cuda_ipc backend cannot run in this process, or '' if it can."""
    try:
        torch = _torch()
    except ImportError:
        return 'cuda_ipc needs torch'
    if not torch.cuda.is_available():
        return 'cuda_ipc needs a CUDA device: no CUDA device (torch.cuda.is_available() is False)'
    if not 0 <= device < torch.cuda.device_count():
        return f'cuda_ipc: no CUDA device {device} (this machine has {torch.cuda.device_count()})'
    try:
        import cupy  # noqa: F401
    except ImportError:
        return 'cuda_ipc needs CuPy for the CUDA IPC calls (pip install cupy-cuda12x)'
    return ''


class CudaMemory:
    """``cudaMalloc`` region and its IPC handle through CuPy; torch sees it through DLPack."""

    def __init__(self, ptr: int, nbytes: int, device: int, owned: bool):
        self.ptr, self.nbytes, self.device, self.owned = ptr, nbytes, device, owned
        self._tensor = None

    @staticmethod
    def check(device: int) -> None:
        why = cuda_unavailable(device)
        if why:
            raise CacheError(why)

    @classmethod
    def allocate(cls, nbytes: int, device: int) -> CudaMemory:
        import cupy

        with cupy.cuda.Device(device):
            ptr = cupy.cuda.runtime.malloc(nbytes)
            cupy.cuda.runtime.memset(ptr, 0, nbytes)
        return cls(ptr, nbytes, device, owned=True)

    @classmethod
    def open(cls, handle: bytes, nbytes: int, device: int) -> CudaMemory:
        import cupy

        try:
            with cupy.cuda.Device(device):
                ptr = cupy.cuda.runtime.ipcOpenMemHandle(handle)
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise CacheError(f"cannot open the ring's CUDA IPC handle: {exc}") from exc
        return cls(ptr, nbytes, device, owned=False)

    def handle(self) -> bytes:
        import cupy

        return bytes(cupy.cuda.runtime.ipcGetMemHandle(self.ptr))

    def tensor(self):
        if self._tensor is None:
            import cupy

            mem = cupy.cuda.UnownedMemory(self.ptr, self.nbytes, self, device_id=self.device)
            region = cupy.ndarray((self.nbytes,), cupy.uint8, cupy.cuda.MemoryPointer(mem, 0))
            self._tensor = _torch().from_dlpack(region)
        return self._tensor

    def synchronize(self) -> None:
        torch = _torch()
        torch.cuda.current_stream(self.device).synchronize()

    def close(self) -> None:
        if self.ptr is None:
            return
        import cupy

        self._tensor = None
        with cupy.cuda.Device(self.device):
            if self.owned:
                cupy.cuda.runtime.free(self.ptr)
            else:
                cupy.cuda.runtime.ipcCloseMemHandle(self.ptr)
        self.ptr = None


def _slot_view(region, slot_bytes: int, slot: int, shape, dtype: str):
    n = int(np.prod(shape)) * ITEMSIZE[dtype]
    start = slot * slot_bytes
    return region[start : start + n].view(torch_dtype(dtype)).view(tuple(shape))


class CudaIpcRingWriter(ShmRingWriter):
    """The single writer: slot data on ``device``, everything else as ``ShmRingWriter``.

    ``put`` takes a torch tensor (on the device, or on the host: it is uploaded) or a
    numpy array of the ring's dtype. ``memory`` is the device-memory class (tests pass a
    host stand-in)."""

    backend = 'cuda_ipc'
    data_location = DATA_ON_DEVICE

    def __init__(
        self,
        name: str,
        capacity: int,
        slot_shape: tuple[int, ...],
        version: str,
        dtype: str = 'float32',
        logger: Callable[[str], None] = print,
        device: int = 0,
        memory=CudaMemory,
    ):
        memory.check(device)  # before a segment exists: nothing to clean up on refusal
        self.device = device
        self._memory_cls = memory
        self.memory: DeviceMemory | None = None
        super().__init__(name, capacity, slot_shape, version, dtype, logger)

    def _init_data(self, hdr: np.ndarray, nbytes: int) -> None:
        self.memory = self._memory_cls.allocate(max(nbytes, 1), self.device)
        handle = self.memory.handle()
        if not 0 < len(handle) <= HANDLE_BYTES:
            raise CacheError(f'a device memory handle of {len(handle)} bytes does not fit')
        self._mm[H_HANDLE_OFF : H_HANDLE_OFF + len(handle)] = handle
        hdr[H_HANDLE_LEN] = len(handle)
        hdr[H_DEVICE] = self.device
        self._region = self.memory.tensor()

    def _check_array(self, array) -> None:
        torch = _torch()
        if not isinstance(array, torch.Tensor):
            if not isinstance(array, np.ndarray) or array.dtype != storage_dtype(self.dtype):
                raise CacheError(f'a {self.dtype} torch tensor or numpy array is needed')
            array = _as_torch(array, self.dtype)
        nbytes = array.numel() * array.element_size()
        if array.dtype != torch_dtype(self.dtype) or nbytes > self._l.slot_bytes or array.ndim > 4:
            raise CacheError(
                f'tensor {tuple(array.shape)} {array.dtype} does not fit a slot of '
                f'{self._l.slot_bytes} bytes {self.dtype}'
            )

    @staticmethod
    def _nbytes(array) -> int:
        if isinstance(array, np.ndarray):
            return int(array.nbytes)
        return int(array.numel() * array.element_size())

    def _write_data(self, slot: int, array) -> None:
        if isinstance(array, np.ndarray):
            array = _as_torch(array, self.dtype)
        dst = _slot_view(self._region, self._l.slot_bytes, slot, array.shape, self.dtype)
        dst.copy_(array)
        self.memory.synchronize()  # complete before the sequence turns even

    def close(self, unlink: bool = True) -> None:
        if self._closed:
            return
        super().close(unlink)
        # readers hold their own mapping of the region until they see the segment closed
        self._region = None
        if self.memory is not None:
            self.memory.close()
            self.memory = None


class CudaIpcRingReader(ShmRingReader):
    """Attach to a writer's ring; a slot is read as a torch tensor on the writer's device."""

    backend = 'cuda_ipc'
    data_location = DATA_ON_DEVICE

    def __init__(
        self,
        name: str,
        ttl_ms: float,
        clock: Callable[[], int] = now_ns,
        memory=CudaMemory,
        device: int = 0,
    ):
        memory.check(device)
        self._memory_cls = memory
        self.memory: DeviceMemory | None = None
        self._region = None
        self.handles_opened = 0  # once per writer (start, restart)
        super().__init__(name, ttl_ms, clock)

    def _attach_data(self, lay: _ShmLayout) -> None:
        handle = lay.handle()
        if not handle:
            raise CacheError(f'segment {self.path} has no device memory handle')
        self.memory = self._memory_cls.open(
            handle, max(lay.capacity * lay.slot_bytes, 1), int(lay.hdr[H_DEVICE])
        )
        self._region = self.memory.tensor()
        self.handles_opened += 1

    def _detach_data(self) -> None:
        self._region = None
        if self.memory is not None:
            self.memory.close()
            self.memory = None

    def _data_view(self, lay: _ShmLayout, slot: int, shape, dtype: str):
        return _slot_view(self._region, lay.slot_bytes, slot, shape, dtype)

    def _copy(self, view, into):
        into.copy_(view)
        self.memory.synchronize()  # complete before the sequence is checked again
        return into

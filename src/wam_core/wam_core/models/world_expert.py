"""World expert (type ``vit``): a transformers ViT vision encoder, from a local directory.

It runs once per distinct observation; each view's last hidden state ([tokens, hidden],
65x192 for the default 128 px / patch 16 model) is that view's part of the
*representation* the action expert reuses on every control tick. The views it needs
are the manifest's ``extra.views`` (default: one, ``front``); all views of an
observation go through one batched forward pass.

On the CPU, ``enable_torchscript`` traces the encode once per frame count into a frozen
TorchScript graph that runs without the GIL (``models/torchscript.py``: the node's other
threads no longer stretch an encode). At int8 the activations of a forward share one
quantization scale, so a robot's representation depends a little (~1.6 % relative at
most, measured with a noise frame beside it) on the frames batched with it; fp32 and bf16
batch bit-exactly. On a CUDA device the frames of a forward are staged
as bytes in pinned host memory, uploaded in one non-blocking copy and normalised on the
device; with ``enable_cuda_graphs`` each batch size's forward is a captured CUDA graph.
The host waits once per forward: for the representation's copy to the host, or
(``on_device``, for the ``cuda_ipc`` cache) not at all here — the cache's writer
synchronises its copy.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from transformers import ViTConfig, ViTModel

from ..common.quiet_loading import no_progress_bars
from .contract import ContractError, Observation, ViewSpec, WorldExpertSpec
from .cuda_graphs import GraphedCall, device_unavailable
from .manifest import verify_manifest
from .precision import INT8, load_dtype, quantize_linear_int8, resolve_precision
from .preprocess import Preprocessor
from .torchscript import frames_graph


def _vit(hidden: int, layers: int, heads: int, image: int) -> ViTConfig:
    return ViTConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        image_size=image,
        patch_size=16,
        num_channels=3,
        hidden_act='gelu',
        layer_norm_eps=1e-6,
        qkv_bias=True,
    )


def default_world_config() -> ViTConfig:
    """The shipped world expert: 4 layers, 192 wide, 128 px (~4 ms on one CPU core)."""
    return _vit(192, 4, 3, 128)


def realistic_world_config() -> ViTConfig:
    """ViT-B/16 at 224 px (86 M parameters, 197 tokens x 768 per view): the size a robot
    team deploys on a GPU, for the latency figures (``default_models --world-size base``)."""
    return _vit(768, 12, 12, 224)


WORLD_SIZES = {'tiny': default_world_config, 'base': realistic_world_config}


def representation_tokens(cfg: ViTConfig) -> int:
    """Tokens of a ViT's representation: one per patch plus the CLS token."""
    return (cfg.image_size // cfg.patch_size) ** 2 + 1


class WorldExpert:
    """Encode an observation into representation tokens (float32 numpy, [V*T, D])."""

    def __init__(self, model_dir: str, precision: str = 'bf16', device: str = 'cpu', robot=None):
        self.manifest = verify_manifest(model_dir)  # refuse tampered weights before touching them
        self.version = self.manifest.version
        self.name = self.manifest.name
        why = device_unavailable(device)
        if why:
            raise ContractError(why)
        self.precision = resolve_precision(precision, device, int8=True)
        self.dtype = load_dtype(self.precision)
        self.device = torch.device(device)
        self.on_cuda = self.device.type == 'cuda'
        self._graphs: dict[int, GraphedCall] = {}  # frames per forward -> its graph
        # TorchScript on the CPU, per frames per forward: the camera's uint8 frames at the
        # model's size -> the representation (frames of another size run eagerly)
        self._scripted_frames: dict[int, torch.jit.ScriptModule] = {}
        # pinned uint8 frames per (count, height, width), and the event of their last upload
        self._staging: dict[tuple[int, int, int], tuple] = {}
        with no_progress_bars():
            self.model = ViTModel.from_pretrained(
                model_dir, add_pooling_layer=False, dtype=self.dtype
            )
        self.model.eval().to(self.device)
        if self.precision == INT8:
            quantize_linear_int8(self.model)
        cfg = self.model.config
        self.image_size = cfg.image_size
        self.tokens = representation_tokens(cfg)
        self.hidden = cfg.hidden_size
        self.preprocess = Preprocessor(self.image_size, dtype=self.dtype)
        views = self.manifest.extra.get('views') or ['front']
        if not isinstance(views, list) or not all(isinstance(v, str) for v in views):
            raise ContractError(f'{model_dir!r}: manifest extra.views must be a list of names')
        self.spec = WorldExpertSpec(
            views=tuple(ViewSpec(v, self.image_size, self.image_size) for v in views),
            view_shape=(self.tokens, self.hidden),
        )
        # representations stay on the device (a cuda_ipc cache takes them there)
        self.output_on_device = False
        self.calls = 0  # observations encoded: the "world-expert calls" metric
        self.forwards = 0  # forward passes (a batch of observations is one)

    @property
    def shape(self):
        return self.spec.shape

    def _frames(self, observation) -> list[np.ndarray]:
        if isinstance(observation, np.ndarray):  # a lone frame: the only view
            if len(self.spec.views) != 1:
                raise ValueError(f'this expert needs the views {self.spec.view_names}')
            return [observation]
        try:
            return [observation.views[name] for name in self.spec.view_names]
        except KeyError as exc:
            raise ValueError(f'observation lacks the view {exc.args[0]!r}') from None

    @torch.inference_mode()
    def encode(self, observation: Observation | np.ndarray) -> np.ndarray:
        """One observation (or, for a one-view expert, one HxWx3 uint8 frame)."""
        return self.encode_batch([observation])[0]

    def _pixels(self, frames: list[np.ndarray]) -> torch.Tensor:
        if not self.on_cuda:
            return torch.cat([self.preprocess(f) for f in frames])
        h, w = frames[0].shape[:2]
        key = (len(frames), h, w)
        staging, uploaded = self._staging.get(key, (None, None))
        if staging is None:
            staging = torch.empty((len(frames), h, w, 3), dtype=torch.uint8).pin_memory()
            uploaded = torch.cuda.Event()
        else:
            uploaded.synchronize()  # the last upload from this buffer is done (it usually is)
        view = staging.numpy()
        for i, f in enumerate(frames):
            view[i] = f
        on_device = staging.to(self.device, non_blocking=True)
        uploaded.record()
        self._staging[key] = (staging, uploaded)
        return self.preprocess.on_device(on_device)

    def _forward(self, pixels: torch.Tensor) -> torch.Tensor:
        graph = self._graphs.get(pixels.shape[0])
        if graph is not None:
            return graph(pixels)
        return self.model(pixel_values=pixels).last_hidden_state

    @torch.inference_mode()
    def encode_batch(self, observations, on_device: bool | None = None) -> list:
        """Several observations (a fleet's robots), every view of each, in one forward:
        float32 numpy [V*T, D] each, or with ``on_device`` (default: ``output_on_device``)
        float32 tensors on the device."""
        if on_device is None:
            on_device = self.output_on_device
        frames = [f for o in observations for f in self._frames(o)]
        scripted = self._scripted_frames.get(len(frames))
        if scripted is not None and all(
            f.shape == self._frame_shape and f.dtype == np.uint8 for f in frames
        ):
            # the whole encode in one call outside the GIL: np.stack is the only other op
            hidden = scripted(torch.from_numpy(np.stack(frames)))
        else:
            pixels = self._pixels(frames)
            hidden = self._forward(pixels)
            if pixels.shape[0] in self._graphs and hidden.dtype == torch.float32:
                hidden = hidden.clone()  # the graph's buffer is rewritten by its next replay
            hidden = hidden.float()
        if not on_device:
            hidden = hidden.cpu().numpy()  # the one wait for the device
        self.calls += len(observations)
        self.forwards += 1
        per = len(self.spec.views)
        return [
            hidden[i * per : (i + 1) * per].reshape(self.spec.shape)
            for i in range(len(observations))
        ]

    def enable_cuda_graphs(self, batch_sizes: tuple[int, ...] = (1,)) -> None:
        """Capture the forward for each batch size (observations per forward; every view
        of each is a frame), so serving replays graphs. Needs the CUDA device."""
        if not self.on_cuda:
            raise ContractError('CUDA graphs need the world expert on a CUDA device')
        size = self.image_size
        for b in batch_sizes:
            n = b * len(self.spec.views)
            example = torch.zeros((n, 3, size, size), dtype=self.dtype, device=self.device)
            self._graphs[n] = GraphedCall(
                lambda px: self.model(pixel_values=px).last_hidden_state, [example]
            )

    @property
    def scripted_frame_counts(self) -> tuple[int, ...]:
        """Frames per forward that run as a TorchScript graph (empty: all eager)."""
        return tuple(sorted(self._scripted_frames))

    @property
    def _frame_shape(self) -> tuple[int, int, int]:
        return (self.image_size, self.image_size, 3)

    def enable_torchscript(self, batch_sizes: tuple[int, ...] = (1,)) -> str:
        """Trace the CPU encode for each batch size (observations per forward), from the
        camera's uint8 frames at the model's size, into a frozen TorchScript graph run
        without the GIL. Returns why not ('' when done); a batch size without a graph,
        and frames of another size (resized first), run eagerly."""
        if self.on_cuda:
            return 'TorchScript is for the CPU forward (a GPU captures CUDA graphs)'
        scale, shift = self.preprocess.affine()
        for b in batch_sizes:
            n = b * len(self.spec.views)
            example = torch.zeros((n, *self._frame_shape), dtype=torch.uint8)
            graph, why = frames_graph(self.model, scale, shift, self.dtype, example)
            if graph is None:
                self._scripted_frames.clear()
                return why
            self._scripted_frames[n] = graph
        return ''

    def warmup(self, n: int, batch_sizes: tuple[int, ...] = (1,)) -> float:
        """Run n encodes of a synthetic frame; return the mean seconds per encode."""
        if n <= 0:
            return 0.0
        rng = np.random.default_rng(0)
        frame = rng.integers(0, 255, size=(self.image_size, self.image_size, 3), dtype=np.uint8)
        obs = Observation(dict.fromkeys(self.spec.view_names, frame))
        calls, forwards = self.calls, self.forwards
        t0 = time.perf_counter()
        for _ in range(n):
            self.encode(obs)
        mean = (time.perf_counter() - t0) / n
        for size in batch_sizes:  # each batch shape a fleet will send, once or twice
            if size > 1:
                for _ in range(2):
                    self.encode_batch([obs] * size)
        self.calls, self.forwards = calls, forwards  # warm-up encodes are not frames
        return mean

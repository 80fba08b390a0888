"""π0's world expert (type ``pi0``): camera views and the subtask's text -> the VLM's
prefix key/value cache, once per observation.

This is the first half of ``PI0ForConditionalGeneration.sample_actions``: ``embed_prefix``
(SigLIP over each camera, projected, placed at the image tokens in front of the prompt)
and the PaliGemma language model over the prefix with its cache on. The robot's cameras
fill the model's image slots as the manifest maps them; a slot the robot does not fill is
masked, which is the same as leaving its image out (``embed_prefix`` places the present
cameras' features in slot order), so only the present cameras are encoded. The prompt is
the active subtask: a new subtask is a new observation (``WorldExpertSpec.prompt``).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from transformers import AutoTokenizer

from ..contract import ContractError, Observation, ViewSpec, WorldExpertSpec
from .images import Pi0Images
from .load import REPRESENTATION_DTYPES, geometry, load_pi0
from .prefix import pack_prefix, planes
from .prompt import Pi0Prompt
from .serving import image_processing


def to_host(t: torch.Tensor) -> np.ndarray:
    """A representation tensor -> a host array in the cache's storage words (bfloat16 as
    its 16-bit words: numpy has no bfloat16)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


class Pi0WorldExpert:
    def __init__(self, model_dir: str, precision: str = 'fp32', device: str = 'cpu', robot=None):
        self.manifest, self.serving, processor, model = load_pi0(
            model_dir, precision, device, keep='vlm'
        )
        self.name, self.version = self.manifest.name, self.manifest.version
        self.model = model.model  # PI0Model, its VLM only
        self.dtype = next(self.model.parameters()).dtype
        self.device = torch.device(device)
        cfg = model.config
        where = repr(model_dir)
        steps = image_processing(processor, cfg.vlm_config.vision_config, where)
        self.images = Pi0Images(steps, self.dtype, self.device)
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
        except (OSError, ValueError) as exc:
            raise ContractError(f'{where}: no usable tokenizer: {exc}') from None
        image_token_id = int(cfg.vlm_config.image_token_id)
        found = tokenizer.convert_tokens_to_ids('<image>')
        if found != image_token_id:
            raise ContractError(
                f"{where}: the tokenizer's <image> is {found}, the model expects "
                f"{image_token_id}: not this checkpoint's tokenizer"
            )
        views = self.serving.views
        image_tokens = steps.tokens_per_image * len(views)
        self.prompt = Pi0Prompt(
            tokenizer, image_token_id, image_tokens, self.serving.prompt_tokens
        )
        layers, kv_heads, head_dim = geometry(cfg)
        side = cfg.vlm_config.vision_config.image_size
        self.spec = WorldExpertSpec(
            views=tuple(ViewSpec(v, side, side) for v in views),
            dtype=REPRESENTATION_DTYPES[self.dtype],
            prompt=True,
            whole_shape=(planes(layers, kv_heads), self.prompt.length, head_dim),
            max_cache_slots=self.serving.max_cache_slots,
        )
        self.output_on_device = False  # a cuda_ipc cache takes the prefix on the device
        self.calls = 0
        self.forwards = 0

    def inputs(self, observations) -> dict[str, torch.Tensor]:
        """What ``sample_actions`` takes for these observations: input_ids, attention_mask,
        pixel_values [B, cameras, 3, S, S], pixel_attention_mask."""
        try:
            frames = [o.views[v] for o in observations for v in self.spec.view_names]
        except KeyError as exc:
            raise ValueError(f'observation lacks the view {exc.args[0]!r}') from None
        b, v = len(observations), len(self.spec.views)
        pixels = self.images(frames)
        ids, mask = self.prompt([o.prompt for o in observations])
        return {
            'input_ids': ids.to(self.device),
            'attention_mask': mask.to(self.device),
            'pixel_values': pixels.view(b, v, *pixels.shape[1:]),
            'pixel_attention_mask': torch.ones(b, v, dtype=torch.bool, device=self.device),
        }

    @torch.inference_mode()
    def prefix(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The prefix of ``inputs``, packed: [B, planes, P, head_dim] in the model's dtype."""
        mask = inputs['attention_mask']
        embeds = self.model.embed_prefix(
            inputs['input_ids'], inputs['pixel_values'], inputs['pixel_attention_mask']
        )
        cache = self.model.vlm(
            inputs_embeds=embeds,
            attention_mask=mask,
            position_ids=mask.cumsum(-1) - 1,
            token_type_ids=torch.zeros_like(embeds)[:, :, 0],
            use_cache=True,
        ).past_key_values
        return pack_prefix(cache, mask)

    def encode(self, observation: Observation) -> np.ndarray:
        return self.encode_batch([observation])[0]

    @torch.inference_mode()
    def encode_batch(self, observations, on_device: bool | None = None) -> list:
        """Several observations (a fleet's robots) in one pass: host arrays in the cache's
        storage words, or with ``on_device`` tensors on the device."""
        if on_device is None:
            on_device = self.output_on_device
        packed = self.prefix(self.inputs(observations))
        self.calls += len(observations)
        self.forwards += 1
        if on_device:
            return list(packed.unbind(0))
        host = to_host(packed)
        return [host[i] for i in range(len(observations))]

    def warmup(self, n: int, batch_sizes: tuple[int, ...] = (1,)) -> float:
        if n <= 0:
            return 0.0
        rng = np.random.default_rng(0)
        views = {
            s.name: rng.integers(0, 255, (s.height, s.width, 3), dtype=np.uint8)
            for s in self.spec.views
        }
        obs = Observation(views, prompt='warm up')
        calls, forwards = self.calls, self.forwards
        t0 = time.perf_counter()
        for _ in range(n):
            self.encode(obs)
        mean = (time.perf_counter() - t0) / n
        for size in batch_sizes:
            if size > 1:
                self.encode_batch([obs] * size)
        self.calls, self.forwards = calls, forwards
        return mean

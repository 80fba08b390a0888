"""π0 model directories that load with no network: seeded ones written here, downloaded
ones sealed.

``write_pi0`` writes a complete directory for the tabletop arm: the checkpoint in
transformers' format (``tiny``: a 2.3 M-parameter π0 for tests and the demo on a CPU;
``base``: the ``lerobot/pi0_base`` architecture, 3.5 B parameters, with random weights),
the processor's files (``PI0Processor.save_pretrained``'s layout: a tokenizer built here,
since PaliGemma's cannot be downloaded on this machine; the image processing; the
normalisation statistics), and the manifest with the ``pi0`` serving block and a sha256
for every file. The weights are untrained: the arm moves, the task is not expected to
succeed (``trained: false`` says so).

``seal`` writes the manifest of a directory a team filled itself (a downloaded or
fine-tuned checkpoint saved with ``save_pretrained``, its processor, a serving block):
docs/pi0.md gives the steps.
"""

from __future__ import annotations

import json
import os

import torch

from ..manifest import write_manifest
from .serving import PROCESSOR_CONFIG

# the tabletop arm (its URDF's joints, command order) and its home pose, which the
# seeded statistics centre on: an untrained model's actions stay near home
TABLETOP_JOINTS = [
    'arm_joint_1',
    'arm_joint_2',
    'arm_joint_3',
    'arm_joint_4',
    'arm_joint_5',
    'arm_joint_6',
    'gripper_joint',
]
TABLETOP_HOME = [0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.04]
# a few degrees (a few mm for the gripper): an untrained model's actions, noise-sized in
# normalised units, stay a gentle motion around home rather than a lunge into the limits
TABLETOP_SPREAD = [0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.004]
PROMPT_TOKENS = 48  # LeRobot's tokenizer max_length for π0

# text the seeded tokenizer learns its merges from: the tabletop's subtasks
CORPUS = [
    'reach the red apple',
    'grasp the red apple',
    'lift the red apple',
    'move the red apple to the fridge',
    'place the red apple in the fridge',
    'put the red apple in the fridge',
    'open the gripper and release it',
    'close the gripper',
    'pick up the green cube and put it on the left of the blue box',
    'go back home and wait',
]


def tiny_config(image_size: int = 112):
    """SigLIP 2x128, Gemma 2x256, DiT 2x128 (2.3 M parameters with a small vocabulary):
    the π0 layout at a size a CPU serves in tens of ms. 112 px (8x8 patches of 14) keeps
    a two-camera prefix at 176 tokens; at 224 px it is 560 and the prefix takes ~55 ms
    here, past a 50 ms TTL."""
    from transformers import PI0Config

    return PI0Config(
        vlm_config={
            'model_type': 'paligemma',
            'text_config': {
                'model_type': 'gemma',
                'hidden_size': 256,
                'num_hidden_layers': 2,
                'intermediate_size': 512,
                'num_attention_heads': 4,
                'num_key_value_heads': 1,
                'head_dim': 64,
                'vocab_size': 2048,
            },
            'vision_config': {
                'model_type': 'siglip_vision_model',
                'hidden_size': 128,
                'intermediate_size': 256,
                'num_hidden_layers': 2,
                'num_attention_heads': 2,
                'patch_size': 14,
                'image_size': image_size,
                'vision_use_head': False,
            },
            'projection_dim': 256,
        },
        dit_config={
            'model_type': 'gemma',
            'hidden_size': 128,
            'num_hidden_layers': 2,
            'intermediate_size': 256,
            'num_attention_heads': 2,
            'num_key_value_heads': 1,
            'head_dim': 64,
        },
        chunk_size=50,
    )


def base_config():
    """``lerobot/pi0_base``'s architecture: PaliGemma 3B (SigLIP So400m/14 at 224 px,
    Gemma 2B) and a Gemma-300M action expert; 50-step chunks, 32 state/action dims."""
    from transformers import PI0Config

    return PI0Config()


SIZES = {'tiny': tiny_config, 'base': base_config}


def _tokenizer():
    """A byte-level BPE learned from CORPUS, with PaliGemma's special tokens' names.
    Deterministic: the same corpus gives the same merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=['<pad>', '<eos>', '<bos>', '<unk>'],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS + [c + '\n' for c in CORPUS], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token='<bos>',
        eos_token='<eos>',
        pad_token='<pad>',
        unk_token='<unk>',
        padding_side='right',
    )


def pi0_image_processor(side: int, tokens: int) -> dict:
    """``PI0ImageProcessor``'s settings, as its processor saves them."""
    return {
        'image_processor_type': 'PI0ImageProcessor',
        'do_resize': True,
        'size': {'max_height': side, 'max_width': side},
        'resample': 3,
        'do_rescale': True,
        'rescale_factor': 1 / 255,
        'do_normalize': True,
        'image_mean': [0.5, 0.5, 0.5],
        'image_std': [0.5, 0.5, 0.5],
        'do_pad': True,
        'pad_size': {'height': side, 'width': side},
        'do_convert_rgb': True,
        'image_seq_length': tokens,
    }


def write_processor(out: str, config, stats: dict) -> tuple[int, int]:
    """PI0Processor.save_pretrained's files (built with a PIL-backend image processor,
    whose block is then replaced by PI0ImageProcessor's: the torchvision one cannot be
    made here). Returns the image token's id and the tokenizer's size."""
    from transformers import PI0Processor, SiglipImageProcessorPil

    vision = config.vlm_config.vision_config
    tokens = (vision.image_size // vision.patch_size) ** 2
    stand_in = SiglipImageProcessorPil()
    stand_in.image_seq_length = tokens
    processor = PI0Processor(
        image_processor=stand_in,
        tokenizer=_tokenizer(),
        max_state_dim=config.max_state_dim,
        chunk_size=config.chunk_size,
        **stats,
    )
    processor.save_pretrained(out)
    path = os.path.join(out, PROCESSOR_CONFIG)
    with open(path, encoding='utf-8') as fh:
        doc = json.load(fh)
    doc['image_processor'] = pi0_image_processor(vision.image_size, tokens)
    with open(path, 'w', encoding='utf-8') as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write('\n')
    return int(processor.image_token_id), len(processor.tokenizer)


def serving_block(views: list[str], **overrides) -> dict:
    block = {
        'views': list(views),
        'joints': list(TABLETOP_JOINTS),
        'scale': [1.0] * len(TABLETOP_JOINTS),
        'output': 'absolute',
        'period_s': 0.02,
        'prompt_tokens': PROMPT_TOKENS,
        'num_inference_steps': 10,
        'noise_seed': 0,
        'max_cache_slots': 16,
    }
    block.update(overrides)
    return block


def write_pi0(
    out: str,
    size: str = 'tiny',
    views: tuple[str, ...] = ('front', 'wrist'),
    seed: int = 0,
    log=print,
) -> dict:
    """A seeded π0 directory for the tabletop arm at ``out``; returns where and what."""
    if size not in SIZES:
        raise ValueError(f'size must be one of {", ".join(SIZES)}, got {size!r}')
    if not views or len(set(views)) != len(views):
        raise ValueError(f'views must be distinct camera names, got {views}')
    from transformers import PI0ForConditionalGeneration

    os.makedirs(out, exist_ok=True)
    config = SIZES[size]()
    spread = TABLETOP_SPREAD
    stats = {
        'state_mean': list(TABLETOP_HOME),
        'state_std': list(spread),
        'actions_mean': list(TABLETOP_HOME),
        'actions_std': list(spread),
    }
    log(f'[pi0] writing the processor (tokenizer, image processing, statistics) to {out}')
    image_token, vocab = write_processor(out, config, stats)
    config.vlm_config.image_token_id = image_token
    if size == 'tiny':  # the tiny model's vocabulary is the seeded tokenizer's
        config.vlm_config.text_config.vocab_size = max(vocab, image_token + 1)
        config.dit_config.vocab_size = config.vlm_config.text_config.vocab_size
    torch.manual_seed(seed)
    # base: built in bf16 (7 GB rather than 14 GB in memory and on disk)
    dtype = torch.bfloat16 if size == 'base' else torch.float32
    log(f'[pi0] building the {size} model (seed {seed}, {dtype})')
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = PI0ForConditionalGeneration(config).eval()
    finally:
        torch.set_default_dtype(previous)
    params = sum(p.numel() for p in model.parameters())
    log(f'[pi0] {params / 1e6:.1f} M parameters; saving')
    model.save_pretrained(out)
    del model
    name = f'pi0-{size}-{"+".join(views)}'
    version = f'{name}-seed{seed}'
    manifest = write_manifest(
        out,
        name,
        version,
        {
            'type': 'pi0',
            'trained': False,
            'views': list(views),
            'parameters': params,
            'pi0': serving_block(list(views)),
        },
    )
    log(f'[pi0] manifest written: {len(manifest.files)} files, version {version}')
    return {'dir': out, 'version': version, 'parameters': params}


def seal(model_dir: str, serving: dict, name: str, version: str, trained: bool = True):
    """The manifest of a directory a team filled: checksums of every file and the serving
    block (checked when the experts load it)."""
    from .serving import Pi0Serving

    Pi0Serving.from_manifest({'pi0': serving}, repr(model_dir))  # refuse a bad block now
    return write_manifest(
        model_dir,
        name,
        version,
        {
            'type': 'pi0',
            'trained': trained,
            'views': [v for v in serving.get('views', []) if v],
            'pi0': serving,
        },
    )

"""π0's prefix tokens: the image tokens of every camera, then the prompt.

The layout π0 was trained with (openpi, LeRobot, transformers' ``PI0Processor``): one
``<image>`` token per image feature for each camera present, then ``<bos>``, the task
text and a newline. LeRobot tokenizes the text part to a fixed ``max_length`` (48,
right-padded, truncated), which also keeps the prefix a fixed length here: the
representation has one shape, so a cache ring's slots are one size. The attention mask
is 1 for image and text tokens, 0 for padding.

Special tokens in the text are removed first: an ``<image>`` typed into a subtask would
otherwise claim an image feature that is not there.
"""

from __future__ import annotations

import torch


class Pi0Prompt:
    def __init__(self, tokenizer, image_token_id: int, image_tokens: int, prompt_tokens: int):
        """``image_tokens``: image tokens in front (per image x cameras present)."""
        if tokenizer.pad_token_id is None or tokenizer.bos_token is None:
            raise ValueError('the tokenizer needs a pad and a bos token')
        self.tokenizer = tokenizer
        self.image_token_id = int(image_token_id)
        self.image_tokens = int(image_tokens)
        self.prompt_tokens = int(prompt_tokens)
        self._special = sorted(
            (t for t in tokenizer.all_special_tokens if t), key=len, reverse=True
        )

    @property
    def length(self) -> int:
        """Tokens of the prefix."""
        return self.image_tokens + self.prompt_tokens

    def clean(self, text: str) -> str:
        for token in self._special:
            text = text.replace(token, ' ')
        return text

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompts -> input_ids and attention_mask, [B, length] each (int64)."""
        enc = self.tokenizer(
            [f'{self.tokenizer.bos_token}{self.clean(t)}\n' for t in texts],
            add_special_tokens=False,
            padding='max_length',
            truncation=True,
            max_length=self.prompt_tokens,
            return_tensors='pt',
        )
        text_ids = enc['input_ids'].long()
        text_mask = enc['attention_mask'].long()
        if self.tokenizer.padding_side != 'right':  # the pad goes after the text
            raise ValueError('the tokenizer must pad on the right (padding_side)')
        b = len(texts)
        images = torch.full((b, self.image_tokens), self.image_token_id, dtype=torch.long)
        ids = torch.cat([images, text_ids], dim=1)
        mask = torch.cat([torch.ones_like(images), text_mask], dim=1)
        return ids, mask

"""Offline test kit: tiny random-weight checkpoints built on the fly.

Nothing here downloads anything. Each builder writes a checkpoint with
``save_pretrained`` that loads through the same ``from_pretrained`` code path users
take with real hub names, so the tests exercise the real loading code.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

# Words for the tokenizer's training text; any English-ish text works.
_WORDS = (
    "a photo depicts the object in this part of image what is answer with name only no extra "
    "text kitchen office street bedroom beach forest laptop ham cup bottle chair table oven "
    "sink banana orange car tree dog cat red blue green left right above below layer shard "
    "question scene picture describe there are not any safety sign helmet rail guard"
).split()


def _training_text(n_lines: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(12)) + " ." for _ in range(n_lines)]


def train_byte_bpe(specials: list[str], vocab_size: int, seed: int = 0):
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on generated text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=specials[0] if specials[0] == "<unk>" else None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(seed=seed), trainer)
    return tok


def build_tiny_clip(path: Path) -> Path:
    """A random-weight CLIP (ViT image size 32, patch 8, hidden 32) with a real
    ``CLIPProcessor``; its tokenizer is a byte-level CLIP tokenizer built on the fly."""
    import torch
    from tokenizers import pre_tokenizers
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizerFast,
    )

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    # A fixed byte-level vocabulary with no merges (CLIP's own first 512 entries are
    # the same kind): deterministic across processes, unlike a trained BPE whose ties
    # the trainer breaks in hash order.
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = alphabet + [a + "</w>" for a in alphabet] + ["<|startoftext|>", "<|endoftext|>"]
    tokenizer = CLIPTokenizerFast(vocab={t: i for i, t in enumerate(tokens)}, merges=[])
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=77,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(
            image_size=32,
            patch_size=8,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
        ),
        projection_dim=16,
    )
    # Random weights often put every image on the far side of every text (all cosines
    # negative), which leaves CLIP-S at its zero branch. Take the first seed whose
    # image-text cosines on a fixed probe have both signs, so tests exercise the formulas.
    for seed in range(100):
        torch.manual_seed(seed)
        model = CLIPModel(config).eval()
        cos = _probe_cosines(model, processor)
        if cos.max() > 0.05 and cos.min() < -0.05:
            break
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def _probe_cosines(model, processor):
    import numpy as np
    import torch
    from PIL import Image

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)) for _ in range(6)]
    texts = ["A photo depicts a cup", "A photo depicts a laptop", "blue", "kitchen", "a red car", "the dog"]
    batch = processor(text=texts, images=images, return_tensors="pt", padding=True)
    with torch.no_grad():
        img = model.get_image_features(pixel_values=batch["pixel_values"])
        txt = model.get_text_features(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    img, txt = (getattr(x, "pooler_output", x) for x in (img, txt))
    img, txt = img / img.norm(dim=-1, keepdim=True), txt / txt.norm(dim=-1, keepdim=True)
    return img @ txt.T


_QWEN_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

_QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' or 'video' in part %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_qwen2_5_vl(path: Path) -> Path:
    """A random-weight Qwen2.5-VL (text hidden 64, 2 layers; vision depth 2, hidden 32)
    with a real processor, built per ``shared/FACTS.md``. Outputs are random bytes."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2Tokenizer,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = train_byte_bpe(_QWEN_SPECIALS, vocab_size=1000)
    raw = json.loads(tok.to_str())
    vocab = raw["model"]["vocab"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in raw["model"]["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        chat_template=_QWEN_CHAT_TEMPLATE,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": _QWEN_SPECIALS[1:]})
    sizes = dict(patch_size=14, temporal_patch_size=2, merge_size=2)
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**sizes),
        video_processor=Qwen2VLVideoProcessor(**sizes),
        tokenizer=tokenizer,
        chat_template=_QWEN_CHAT_TEMPLATE,
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _QWEN_SPECIALS}
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
            tie_word_embeddings=False,
            bos_token_id=None,
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            out_hidden_size=64,
            fullatt_block_indexes=[1],
            window_size=56,
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(path)
    processor.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


_LLAVA_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
_LLAVA_CHAT = (
    "{% for message in messages %}{% if message['role'] == 'user' %}USER: {% else %}ASSISTANT: {% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


#: the vision tower both tiny LLaVAs use: image 32, patch 8, so a 4 x 4 grid
_TINY_TOWER = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2, image_size=32, patch_size=8
)


def _tiny_llm(tokenizer, max_positions: int) -> dict:
    """A 2-layer language model config (Llama or Qwen2 shape) over ``tokenizer``."""
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _llava_tokenizer(tok, media_tokens: dict):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens=media_tokens,
        chat_template=_LLAVA_CHAT,
    )


def build_tiny_llava(path: Path) -> Path:
    """A random-weight LLaVA-1.5: CLIP vision tower (image 32, patch 8: a 4 x 4 grid plus
    CLS), 2-layer Llama text model, and a real ``LlavaProcessor`` that expands
    ``<image>`` into 16 image tokens."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = train_byte_bpe(_LLAVA_SPECIALS, vocab_size=300, seed=0)
    tokenizer = _llava_tokenizer(tok, {"image_token": "<image>"})
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_CHAT,
    )
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(**_TINY_TOWER, projection_dim=32).to_dict(),
        text_config=LlamaConfig(**_tiny_llm(tokenizer, max_positions=256)).to_dict(),
        image_token_index=image_id,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_tiny_llava_onevision(path: Path) -> Path:
    """A random-weight LLaVA-OneVision: SigLIP tower (image 32, patch 8: 4 x 4 tokens, no CLS),
    2-layer Qwen2 text model, anyres grid pinpoints up to 64 x 64 (base image + crops)."""
    import torch
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
        Qwen2Config,
        SiglipVisionConfig,
    )

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = train_byte_bpe([*_LLAVA_SPECIALS, "<video>"], vocab_size=300, seed=1)
    tokenizer = _llava_tokenizer(tok, {"image_token": "<image>", "video_token": "<video>"})
    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64]]
    size = {"height": 32, "width": 32}
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=pinpoints, do_pad=True),
        video_processor=LlavaOnevisionVideoProcessor(size=size),
        tokenizer=tokenizer,
        num_image_tokens=16,
        vision_feature_select_strategy="full",
        chat_template=_LLAVA_CHAT,
    )
    config = LlavaOnevisionConfig(
        vision_config=SiglipVisionConfig(**_TINY_TOWER).to_dict(),
        text_config=Qwen2Config(**_tiny_llm(tokenizer, max_positions=512)).to_dict(),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=pinpoints,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path

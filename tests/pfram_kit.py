"""Test helpers for the Pfram and attention tests: a tiny random-weight LLaVA-1.5.

Built offline in about a second: a CLIP vision tower (image 32, patch 8, so a
4 x 4 grid plus CLS), a 2-layer Llama text model, a byte-level BPE tokenizer
trained on the fly, and a real ``LlavaProcessor`` that expands ``<image>`` into
16 image tokens. Saved with ``save_pretrained`` so extraction loads it through
``from_pretrained`` like a hub checkpoint.
"""

from __future__ import annotations

import random
from pathlib import Path

_WORDS = [
    "a",
    "photo",
    "of",
    "the",
    "cat",
    "dog",
    "sofa",
    "table",
    "cup",
    "car",
    "tree",
    "sky",
    "what",
    "is",
    "in",
    "this",
    "image",
    "describe",
    "it",
]
_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
_CHAT = (
    "{% for message in messages %}{% if message['role'] == 'user' %}USER: {% else %}ASSISTANT: {% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def build_tiny_llava(path: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    text = [" ".join(rng.choice(_WORDS) for _ in range(10)) for _ in range(200)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
        chat_template=_CHAT,
    )
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_CHAT,
    )
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
            projection_dim=32,
        ).to_dict(),
        text_config=LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=256,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        ).to_dict(),
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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
        PreTrainedTokenizerFast,
        Qwen2Config,
        SiglipVisionConfig,
    )

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    text = [" ".join(rng.choice(_WORDS) for _ in range(10)) for _ in range(200)]
    specials = [*_SPECIALS, "<video>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>", "video_token": "<video>"},
        chat_template=_CHAT,
    )
    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64]]
    size = {"height": 32, "width": 32}
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=pinpoints, do_pad=True),
        video_processor=LlavaOnevisionVideoProcessor(size=size),
        tokenizer=tokenizer,
        num_image_tokens=16,
        vision_feature_select_strategy="full",
        chat_template=_CHAT,
    )
    config = LlavaOnevisionConfig(
        vision_config=SiglipVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ).to_dict(),
        text_config=Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        ).to_dict(),
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

"""COOCO attention allocation (Appendix C): the pieces on hand-made tensors, then a
tiny random-weight LLaVA end to end for shapes and invariants."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import fixture_dir

from lmms_scene.analysis import attention as A

torch.set_num_threads(1)


def random_attention(layers: int, heads: int, n: int, seed: int = 0, causal: bool = True) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(layers, heads, n, n, generator=g)
    if causal:
        logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return logits.softmax(-1)


def test_llm_image_weights_by_hand():
    a = random_attention(3, 2, 10)
    img, rows = [2, 3, 4, 5], [7, 8, 9]
    got = A.llm_image_weights(list(a), img, rows)
    # independent computation, layer by layer
    want = torch.zeros(3, 10, dtype=torch.float64)
    for layer in range(3):
        m = a[layer].double().mean(0)[rows]
        m[:, 0] = 0
        want += m / m.sum(1, keepdim=True)
    want = (want / 3)[:, img]
    want = want / want.sum(1, keepdim=True)
    torch.testing.assert_close(got, want)
    assert got.shape == (3, 4)
    torch.testing.assert_close(got.sum(1), torch.ones(3, dtype=torch.float64))


def test_llm_weights_ignore_bos_mass():
    a = random_attention(2, 1, 8, seed=1)  # one head: a per-head rescale survives a head mean
    b = a.clone()
    b[..., 0] *= 50  # much more attention on the sink token
    b = b / b.sum(-1, keepdim=True)
    # per layer the renormalised rows match once column 0 is dropped
    torch.testing.assert_close(
        A.llm_image_weights(a[:1], [1, 2, 3], [6, 7]), A.llm_image_weights(b[:1], [1, 2, 3], [6, 7])
    )
    with pytest.raises(ValueError, match="sink"):
        A.llm_image_weights(a, [1, 2], [0])


def test_vit_maps_shapes_and_relu():
    inst = [A.vit_normalised(random_attention(3, 2, 17, seed=s, causal=False)) for s in range(4)]
    assert inst[0].shape == (3, 17, 17)
    torch.testing.assert_close(inst[0].sum(-1), torch.ones(3, 17, dtype=torch.float64))
    base = A.vit_baseline(inst)
    maps = A.vit_token_maps(inst[1], base, n_prefix=1)
    assert maps.shape == (3, 16, 4, 4)
    assert (maps >= 0).all() and (maps > 0).any()
    # column j of the adjusted matrix is token j's map (paper); row mode is the transpose
    adj = torch.relu(inst[1] - base)[:, 1:, 1:]
    torch.testing.assert_close(maps[2, 5].flatten(), adj[2, :, 5])
    torch.testing.assert_close(A.vit_token_maps(inst[1], base, n_prefix=1, use="row")[2, 5].flatten(), adj[2, 5, :])
    with pytest.raises(ValueError, match="square grid"):
        A.vit_token_maps(inst[1], base, n_prefix=0)
    with pytest.raises(ValueError, match="one input resolution"):
        A.vit_baseline([inst[0], inst[0][:, :5, :5]])


def test_image_map_is_weighted_sum():
    maps = torch.rand(2, 4, 3, 3, dtype=torch.float64)
    w = torch.tensor([[1.0, 0, 0, 0], [0, 0.5, 0.5, 0]], dtype=torch.float64)
    got = A.image_attention_map(w, maps)
    want = (maps[:, 0] + 0.5 * maps[:, 1] + 0.5 * maps[:, 2]) / 2
    torch.testing.assert_close(got, want)


def test_ratio_concentrated_in_box_beats_outside():
    target, valid = A.box_masks((0, 0, 320, 320), (640, 640), resolution=64)
    inside = torch.zeros(8, 8, dtype=torch.float64)
    inside[1, 1] = 1.0
    outside = torch.zeros(8, 8, dtype=torch.float64)
    outside[6, 6] = 1.0
    mixed = torch.full((8, 8), 0.01, dtype=torch.float64)
    mixed[1, 1] = 1.0
    r_in, r_out, r_mix = (A.allocation_ratio(m, target, valid) for m in (inside, outside, mixed))
    assert r_in == float("inf") and r_out == 0.0
    assert r_mix > A.allocation_ratio(torch.ones(8, 8), target, valid)
    # a uniform map gives the area ratio: a quarter of the image vs three quarters
    assert A.allocation_ratio(torch.ones(8, 8), target, valid) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="0/0"):
        A.allocation_ratio(torch.zeros(8, 8), target, valid)


def test_padding_is_not_context():
    # a wide image padded to a square: the top and bottom quarters are padding
    target, valid = A.box_masks((0, 0, 100, 100), (400, 200), canvas="pad", resolution=40)
    assert valid.sum() == 40 * 20 and not valid[0].any() and valid[20].all()
    m = torch.ones(8, 8, dtype=torch.float64)
    base = A.allocation_ratio(m, target, valid)
    m[0, :] = 100.0  # heavy attention on padding only
    assert A.allocation_ratio(m, target, valid) == pytest.approx(base)
    assert base == pytest.approx((10 * 10) / (40 * 20 - 100))
    # centre crop: a box entirely in the cut-off part is refused
    with pytest.raises(ValueError, match="covers no canvas pixel"):
        A.box_masks((0, 0, 50, 50), (400, 200), canvas="crop", resolution=40)


def test_tiny_llava_end_to_end(tiny_llava):
    from PIL import Image

    paths = sorted(fixture_dir("tiny_coco", "val2017").glob("*.jpg"))[:3]
    images = [Image.open(p).convert("RGB") for p in paths]
    records = A.collect_attention(str(tiny_llava), images, "What is the object in the box?", max_new_tokens=3)
    assert len(records) == 3
    for rec in records:
        assert rec.n_prefix == 1  # CLIP's CLS token
        assert rec.vit_normalised.shape == (3, 17, 17)  # 3 ViT layers, CLS + 4 x 4 patches
        assert rec.llm_weights.shape[1] == 16 and 1 <= rec.llm_weights.shape[0] <= 3
        torch.testing.assert_close(rec.llm_weights.sum(1), torch.ones(rec.llm_weights.shape[0], dtype=torch.float64))
    # forced outputs take the same path; a trailing end token is dropped
    eos = 2
    forced = A.collect_attention(str(tiny_llava), images[:1], "What is it?", output_ids=[[40, 41, eos]])
    assert forced[0].output_ids == [40, 41] and forced[0].llm_weights.shape == (2, 16)
    boxes = [(50, 50, 200, 150)] * 3
    ratios = A.allocation_ratios(records, boxes, [im.size for im in images], canvas="crop")
    assert ratios.shape == (3, 3)
    assert np.isfinite(ratios).all() and (ratios >= 0).all()
    # the baseline is the dataset mean: one instance alone leaves nothing after ReLU
    with pytest.raises(ValueError, match="0/0"):
        A.allocation_ratios(records[:1], boxes[:1], [images[0].size], canvas="crop")


def test_query_rows_are_the_output_tokens_own_positions(tiny_llava, monkeypatch):
    """App. C.1: output token o_i's row is at o_i's own position in prompt + outputs."""
    from PIL import Image

    seen = {}
    real = A.llm_image_weights

    def spy(attentions, image_positions, query_positions, **kw):
        seen["n"] = attentions[0].shape[-1]
        seen["rows"] = torch.as_tensor(query_positions).tolist()
        seen["image"] = torch.as_tensor(image_positions).tolist()
        return real(attentions, image_positions, query_positions, **kw)

    monkeypatch.setattr(A, "llm_image_weights", spy)
    path = min(fixture_dir("tiny_coco", "val2017").glob("*.jpg"))
    image = Image.open(path).convert("RGB")
    rec = A.collect_attention(str(tiny_llava), [image], "What is it?", output_ids=[[40, 41, 42, 2]])[0]
    assert rec.output_ids == [40, 41, 42]
    n = seen["n"]  # the single forward pass covers prompt + the 3 kept outputs
    assert seen["rows"] == [n - 3, n - 2, n - 1]  # not the rows of the tokens before them
    assert max(seen["image"]) < n - 3
    # the weights are those rows of the full pass, computed independently here
    from transformers import AutoProcessor, LlavaForConditionalGeneration

    model = LlavaForConditionalGeneration.from_pretrained(tiny_llava, attn_implementation="eager").eval()
    proc = AutoProcessor.from_pretrained(tiny_llava)
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}]
    enc = proc(
        text=[proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)],
        images=[image],
        return_tensors="pt",
    )
    ids = torch.cat([enc["input_ids"], torch.tensor([[40, 41, 42]])], dim=1)
    assert ids.shape[1] == n
    with torch.no_grad():
        att = model(input_ids=ids, pixel_values=enc["pixel_values"], output_attentions=True).attentions
    full = torch.stack([t[0] for t in att]).double().mean(1)  # [L, N, N]
    full[:, :, 0] = 0
    rows = full[:, n - 3 :]
    want = (rows / rows.sum(-1, keepdim=True)).mean(0)[:, seen["image"]]
    torch.testing.assert_close(rec.llm_weights, want / want.sum(1, keepdim=True), atol=1e-6, rtol=1e-5)


def test_llm_weights_half_precision_per_layer_list():
    a = random_attention(3, 2, 10, seed=3)
    rows, img = [7, 8, 9], [2, 3, 4, 5]
    want = A.llm_image_weights(a.double(), img, rows)
    got = A.llm_image_weights([t[None].half() for t in a], img, rows)  # HF layout [1, H, N, N]
    assert got.dtype == torch.float64 and got.shape == (3, 4)
    torch.testing.assert_close(got, want, atol=2e-3, rtol=2e-3)
    with pytest.raises(ValueError, match="positions must lie"):
        A.llm_image_weights(a, img, [10])


def test_tiny_llava_onevision_uses_base_image_tokens(tiny_llava_onevision):
    from PIL import Image

    paths = sorted(fixture_dir("tiny_coco", "val2017").glob("*.jpg"))[:2]
    model = tiny_llava_onevision
    images = [Image.open(p).convert("RGB") for p in paths]
    records = A.collect_attention(str(model), images, "Name the object.", max_new_tokens=2)
    for rec in records:
        assert rec.n_prefix == 0  # SigLIP has no CLS token
        assert rec.vit_normalised.shape == (3, 16, 16)
        assert rec.llm_weights.shape[1] == 16  # the base image's 4 x 4 tokens only
    ratios = A.allocation_ratios(records, [(0, 0, 200, 200)] * 2, [im.size for im in images], canvas="stretch")
    assert ratios.shape == (2, 3) and (ratios >= 0).all()

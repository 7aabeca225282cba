"""A test-only task (not shipped): plain-colour images, one- and multi-round.

It exists so that the foundation's tests (registration, our models, the real
harness model classes, multi-process runs) have a task independent of any benchmark.
"""

from PIL import Image

from lmms_scene.harness import round_outputs


def doc_to_visual(doc):
    return [Image.new("RGB", (doc["width"], doc["height"]), tuple(doc["rgb"]))]


def doc_to_text(doc, lmms_eval_specific_kwargs=None, previous_output=None, round_idx=None, previous_round_info=None):
    if round_idx is None or round_idx == 0:
        return f"[{doc['item_id']}] round 0: {doc['question']}"
    if round_idx >= doc["rounds"]:
        return None, None, True, previous_output, previous_round_info
    # Later rounds carry the whole history: no harness model keeps it.
    history = " | ".join(previous_output)
    # Every second round sends a half-size image, so tests can see per-turn visuals.
    w, h = doc["width"] // 2, doc["height"] // 2
    visuals = [Image.new("RGB", (w, h), tuple(doc["rgb"]))] if round_idx % 2 == 0 else []
    info = {"rounds_done": round_idx}
    return visuals, f"[{doc['item_id']}] round {round_idx} after: {history}", False, previous_output, info


def process_results(doc, results):
    outputs = round_outputs(results)
    row = {
        "item_id": doc["item_id"],
        "n_outputs": len(outputs),
        "expected_rounds": doc["rounds"],
        "correct": any(doc["answer"] in o.lower() for o in outputs),
    }
    return {"selftest_accuracy": row, "selftest_rounds_ok": row, "selftest_by_item": row}


def accuracy(rows):
    return sum(r["correct"] for r in rows) / len(rows)


def rounds_ok(rows):
    return sum(r["n_outputs"] == r["expected_rounds"] for r in rows) / len(rows)


def by_item(rows):
    # keyed by id: gathered rows come rank by rank, not in doc order
    return {r["item_id"]: r["n_outputs"] for r in sorted(rows, key=lambda r: r["item_id"])}

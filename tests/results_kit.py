"""Real results files without the harness: the embedded samples' docs scored by the tasks'
own ``process_results`` and aggregations (as tests/golden/make_*_golden.py do), written
the way lmms-eval 0.7.3 writes a run (``<date>_results.json`` plus one
``<date>_samples_<task>.jsonl`` per task). The submission, leaderboard, show and report
tests read these, so what they check is what a real run holds.

Outputs are the pins' fixed mixes, so the numbers are realistic and deterministic.
The item functions score once per process for the same arguments and give every caller
a fresh copy (:func:`_memoised`).
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "golden"))

from make_cooco_golden import outputs_for as cooco_output  # noqa: E402
from make_sample_golden import layered_replies, snus_outputs  # noqa: E402

#: (function, its arguments) -> (the pickled items, LMMS_SCENE_CLIP_MODEL as scoring left it)
_MEMO: dict[tuple[str, str], tuple[bytes, str | None]] = {}


def _memoised(fn):
    """``fn``'s items computed once per process for the same arguments (defaults filled
    in), each call getting its own unpickled copy, so no test can alter what another
    reads. A repeated call sets LMMS_SCENE_CLIP_MODEL as the scoring did; it does not
    clear lmms_scene's caches again (the scoring set nothing a later reader needs)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = (fn.__name__, json.dumps(bound.arguments, sort_keys=True))
        if key not in _MEMO:
            items = fn(*args, **kwargs)
            _MEMO[key] = (pickle.dumps(items), os.environ.get("LMMS_SCENE_CLIP_MODEL"))
        blob, clip = _MEMO[key]
        if clip is None:
            os.environ.pop("LMMS_SCENE_CLIP_MODEL", None)
        else:
            os.environ["LMMS_SCENE_CLIP_MODEL"] = clip
        return pickle.loads(blob)

    return wrapper


def _dataset(path: str):
    import datasets

    return datasets.load_dataset("parquet", data_files={"test": str(REPO / path)})["test"]


@_memoised
def cooco_items(clip_dir: str | None, noise: bool = False, shift: int = 0, fill: bool = False) -> list[dict[str, Any]]:
    """process_results values (every metric key) of the COOCO sample docs; ``shift``
    changes which output each doc gets (another "model"); ``fill``: no empty output (the
    mix's empty answer becomes the gold), for runs a leaderboard ranks."""
    from conftest import clear_cache_keeping_models

    from lmms_scene.tasks.cooco import utils

    os.environ["LMMS_SCENE_CLIP_MODEL"] = clip_dir or "none"
    clear_cache_keeping_models()  # the CLIP setting changed; the NLP models and METEOR stay loaded
    raw = _dataset("tasks/cooco/sample/cooco_sample.parquet")
    docs = utils.process_docs_noise(raw) if noise else utils.process_docs(raw)
    return [
        utils.process_results(doc, [cooco_output(doc, i + shift) or (doc["gold_label"] if fill else "")])
        for i, doc in enumerate(docs)
    ]


@_memoised
def snus_items(shift: int = 0, fill: bool = False) -> list[dict[str, Any]]:
    from lmms_scene.tasks.snus import utils

    os.environ["LMMS_SCENE_CLIP_MODEL"] = "none"
    docs = utils.process_docs(_dataset("tasks/snus/sample/snus_sample.parquet"))
    answers = [snus_outputs(doc, i + shift) or (doc["caption"] if fill else "") for i, doc in enumerate(docs)]
    utils.prescore(list(zip(docs, answers)))  # what the harness hook does after generation
    return [utils.process_results(doc, [a]) for doc, a in zip(docs, answers)]


@_memoised
def layered_items(shift: int = 0, fill: bool = False) -> list[dict[str, Any]]:
    from lmms_scene.data.layered_vqa.rounds import turns_of
    from lmms_scene.tasks.layered_vqa import utils

    docs = utils.process_docs_sample(_dataset("tasks/layered_vqa/sample/layered_vqa_sample.parquet"))
    out = []
    for i, doc in enumerate(docs):
        replies = layered_replies(doc, turns_of(doc), i + shift)
        if fill and not replies[-1].strip():
            replies[-1] = doc["answer"]
        out.append(utils.process_results(doc, [replies]))
    return out


def aggregate(bench: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The metric values the task's aggregations give (``<metric>,none`` keys)."""
    from importlib import import_module

    utils = import_module(f"lmms_scene.tasks.{bench}.utils")
    out = {}
    for key in items[0]:
        if bench == "cooco":
            agg = utils.breakdown if key == "cooco_breakdown" else utils.mean_score
        else:
            agg = getattr(utils, key)
        out[f"{key},none"] = agg([it[key] for it in items])
    return out


def write_run(
    folder: Path,
    tasks: dict[str, tuple[str, list[dict[str, Any]]]],
    *,
    model: str = "qwen2_5_vl",
    model_args: str = "pretrained=/ckpt/Qwen2.5-VL-3B,device=cpu",
    limit: Any = None,
    configs: dict[str, dict[str, Any]] | None = None,
    groups: dict[str, tuple[str, list[str]]] | None = None,
    name: str = "20260101_000000",
    harness: str = "0.7.3",
    samples: bool = True,
) -> Path:
    """Write a run: ``tasks`` maps task -> (benchmark, process_results items). ``groups``:
    group -> (benchmark, its tasks), whose metrics are the group aggregations of the tasks
    (Layered-VQA's retained accuracy from the schedule parts)."""
    folder.mkdir(parents=True, exist_ok=True)
    results, cfgs = {}, {}
    for task, (bench, items) in tasks.items():
        results[task] = {"alias": task, **aggregate(bench, items)}
        cfgs[task] = {
            "task": task,
            "dataset_path": "fmerlo/COOCO" if bench == "cooco" else f"lmms-scene-tests/{bench}",
            "test_split": "test",
            "metadata": {"version": 1.0, "benchmark": bench},
        }
        cfgs[task].update((configs or {}).get(task, {}))
        if samples:
            lines = [{"doc_id": i, "target": "", "resps": [], "filtered_resps": [], **it} for i, it in enumerate(items)]
            (folder / f"{name}_samples_{task}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    group_subtasks = {}
    for group, (_bench, members) in (groups or {}).items():
        from lmms_scene.tasks.layered_vqa import utils as lv

        results[group] = {"alias": group}
        for c in ("text", "visual", "layered"):
            combine = getattr(lv, f"group_retained_{c}")
            results[group][f"retained_{c},none"] = combine([results[t][f"retained_{c},none"] for t in members], None)
        group_subtasks[group] = list(members)
    data = {
        "results": results,
        "group_subtasks": group_subtasks,
        "configs": cfgs,
        "versions": {t: 1.0 for t in tasks},
        "n-samples": {t: {"original": len(v[1]), "effective": len(v[1])} for t, v in tasks.items()},
        "higher_is_better": {t: {} for t in tasks},
        "task_hashes": {t: "abc" for t in tasks},
        "config": {"model": model, "model_args": model_args, "limit": limit},
        "lmms_eval_version": harness,
    }
    path = folder / f"{name}_results.json"
    path.write_text(json.dumps(data))
    return path


def by_schedule(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Layered-VQA sample items split into one task per schedule (``layered_vqa_<schedule>``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        schedule = it["layered_vqa_report"]["schedule"]
        out.setdefault("layered_vqa_" + schedule.replace("-", "_"), []).append(copy.deepcopy(it))
    return out


def full_run(folder: Path, items, k: int = 0, **kw) -> Path:
    """A run folder of "model" ``k`` of ``items`` (conftest's ``scored_items``) on every
    benchmark: COOCO, SNUS and one Layered-VQA task per schedule in their group."""
    sched = by_schedule(items[k]["layered"])
    tasks = {
        "cooco": ("cooco", items[k]["cooco"]),
        "snus": ("snus", items[k]["snus"]),
        **{t: ("layered_vqa", v) for t, v in sched.items()},
    }
    write_run(folder, tasks, groups={"layered_vqa": ("layered_vqa", list(sched))}, **kw)
    return folder


def official_fingerprints(run: Path) -> dict[str, list[str]]:
    """The ``--official`` mapping of every dataset a run's results record (the operator's
    vouching that makes its SNUS and Layered-VQA data official)."""
    data = json.loads(next(run.glob("*_results.json")).read_text())
    out: dict[str, list[str]] = {}
    for task, metrics in data["results"].items():
        for value in metrics.values():
            if isinstance(value, dict) and isinstance(value.get("dataset"), dict):
                out.setdefault(data["configs"][task]["metadata"]["benchmark"], []).append(
                    value["dataset"]["fingerprint"]
                )
    return out

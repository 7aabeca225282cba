"""Parity with the COOCO authors' evaluation (issue 30): lmms-scene's scorer against an
independent re-implementation of their pipeline (tests/cooco_reference.py), on a release
built from real COCO images (../shared/fixtures/tiny_coco) in the authors' format
(tests/test_cooco_release.py), with answers written here to exercise every difference
between the two readings: parenthetical golds (``bat (sports)``), their gold spelling
(``baseball_``), full stops and ``<|im_end|>``, empty and article-only answers, answers
over 77 CLIP tokens, answers longer than the longest gold, capitals and vowel articles.

- ``LMMS_SCENE_COOCO_READING=authors``: every row and every cell (condition x noise area
  x level: n, means, the median RefCLIPScore, the hard accuracy over the rows they keep)
  equals the re-implementation to 1e-6, and the rows it skips are the ones we drop;
- the default reading equals the re-implementation with every documented difference
  switched (``cooco_reference.CLEANED``), and each difference, switched alone, moves
  some row of this fixture (so the answers exercise all of them).
"""

from __future__ import annotations

import dataclasses

import cooco_reference as ref
import pytest
from conftest import fixture_dir  # noqa: F401  (skips without ../shared)
from test_cooco_release import build_cli, load_built, write_release

from lmms_scene import settings
from lmms_scene.data import cooco
from lmms_scene.metrics.cooco import scoring

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cooco_parity")]

TOL = 1e-6
SETTINGS = (("none", 0.0), *((a, lv) for a in ("target", "context", "all") for lv in (0.5, 1.0)))
LONG = "a large and rather old wooden object with four legs " * 3  # over 77 CLIP tokens in both tokenizers


def answers_for(gold: str, k: int) -> str:
    """The k-th answer of a doc whose gold is ``gold`` (the authors' spelling)."""
    name = ref.without_parenthetical(gold).strip()
    choices = (
        name,  # "bat" for "bat (sports)"; "baseball" for "baseball "
        gold,  # the label as spelled ("bat (sports)", "baseball ")
        f"A {name.title()}.",  # capitals, article and a full stop
        f"{name}.<|im_end|>",  # what a chat model's decode leaves
        "",  # empty
        "an ",  # only an article: empty for them, "an" for us
        LONG,  # over 77 CLIP tokens
        "something that looks like a lamp",  # longer than the longest gold
        "   An orange.  ",  # white space, a vowel article
        f"{name} (sports)",  # a parenthetical in the answer
    )
    return choices[k % len(choices)]


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_clip):
    folder, metadata = write_release(tmp_path_factory.mktemp("parity") / "COOCO")
    out = tmp_path_factory.mktemp("parity_built") / "authors"
    assert build_cli(folder, out) == 0
    built = load_built(out)
    answers = {}
    for i, (name, area, level) in enumerate(ref.answer_keys(metadata, SETTINGS)):
        meta = metadata[name]
        gold = (meta["target"] if name.endswith("_original.jpg") else meta["swapped_object"] or "").replace("_", " ")
        answers[(name, area, level)] = answers_for(gold, i)
    return {"folder": folder, "metadata": metadata, "built": built, "answers": answers, "clip": tiny_clip, "out": out}


def ours(world, reading: str) -> tuple[dict[tuple, dict], dict]:
    """Our rows by (file name, area, level) and our report, in ``reading``."""
    ds = world["built"]
    docs = [*cooco.naming_docs(ds, reading=reading), *cooco.noise_grid_docs(ds, reading=reading)]
    with settings.override(clip_model=str(world["clip"])):
        rows = [
            scoring.score_doc(doc, world["answers"][(doc["image_id"] + ".jpg", doc["noise_area"], doc["noise_level"])])
            for doc in docs
        ]
        report = scoring.report(rows)
    assert all(r["scored"] for r in rows), [r.get("unscored_reason") for r in rows if not r["scored"]][:3]
    assert {r["reading"] for r in rows} == {reading}
    return {(r["image_id"] + ".jpg", r["noise_area"], r["noise_level"]): r for r in rows}, report


@pytest.fixture(scope="module")
def clip(world):
    return ref.Clip(world["clip"])


@pytest.fixture(scope="module")
def authors(world, clip):
    return ref.score(world["folder"], world["metadata"], world["answers"], clip, ref.AUTHORS)


@pytest.fixture(scope="module")
def ours_authors(world):
    return ours(world, "authors")


ROW_METRICS = ("refclipscore", "text_similarity", "accuracy", "output_scene_similarity", "levenshtein_accuracy")
CELL_METRICS = (*ROW_METRICS, "refclipscore_median")


def _same_rows(mine: dict[tuple, dict], theirs: dict[tuple, dict], skipped: dict[tuple, str]) -> None:
    kept = {k: r for k, r in mine.items() if not r.get("dropped")}
    assert set(kept) == set(theirs)
    for key, row in theirs.items():
        for metric in ROW_METRICS:
            a, b = kept[key][metric], row[metric]
            assert (a is None) == (b is None) and (a is None or abs(a - b) <= TOL), (
                key,
                metric,
                a,
                b,
                kept[key]["output"],
            )


def _level(key: tuple) -> str:
    return scoring.level_key(key[2])


def _same_cells(report: dict, theirs: dict[tuple, dict]) -> None:
    grid = report["by_condition_noise"]
    seen = 0
    for (condition, area, level), cell in theirs.items():
        mine = grid[condition][area][scoring.level_key(level)]
        assert mine["n"] == cell["n"], (condition, area, level)
        for metric in CELL_METRICS:
            a, b = mine.get(metric), cell[metric]
            assert (a is None) == (b is None) and (a is None or abs(a - b) <= TOL), (
                condition,
                area,
                level,
                metric,
                a,
                b,
            )
        seen += 1
    assert seen == sum(len(levels) for areas in grid.values() for levels in areas.values()) == 5 * 7


def test_the_authors_reading_equals_the_reimplementation_row_by_row(ours_authors, authors):
    mine, _ = ours_authors
    # the rows their code skips are the ones we drop, for the same reasons
    assert {k: r["dropped"] for k, r in mine.items() if r.get("dropped")} == authors["skipped"]
    assert set(authors["skipped"].values()) == {"empty", "over_77_clip_tokens"}
    _same_rows(mine, authors["rows"], authors["skipped"])


def test_the_authors_reading_equals_the_reimplementation_in_every_cell(ours_authors, authors):
    mine, report = ours_authors
    _same_cells(report, authors["cells"])
    counts = report["reading"]
    theirs_long = sum(1 for r in authors["rows"].values() if r["hard_chars"] > authors["longest_gold"])
    assert counts == {
        "reading": "authors",
        "dropped_empty": sum(v == "empty" for v in authors["skipped"].values()),
        "dropped_over_77_clip_tokens": sum(v == "over_77_clip_tokens" for v in authors["skipped"].values()),
        "levenshtein_left_out_longer_than_longest_gold": theirs_long,
        "longest_gold_chars": authors["longest_gold"],
    }
    assert theirs_long > 0 and counts["dropped_empty"] > 0 and counts["dropped_over_77_clip_tokens"] > 0
    assert report["scorer"]["reading"] == "authors" and "JPEG quality 75" in report["scorer"]["image"]
    # the headline aggregation applies the same selection as the breakdown
    entries = [scoring.metric_entries(r)["levenshtein_accuracy"] for r in mine.values()]
    kept = [r for r in authors["rows"].values() if r["hard_chars"] <= authors["longest_gold"]]
    assert scoring.mean_score(entries) == pytest.approx(
        sum(r["levenshtein_accuracy"] for r in kept) / len(kept), abs=TOL
    )
    assert scoring.overall_cell(mine.values())["levenshtein_accuracy"] == pytest.approx(
        scoring.mean_score(entries), abs=TOL
    )


def test_the_default_reading_differs_only_by_the_documented_differences(world, clip):
    mine, report = ours(world, "cleaned")
    theirs = ref.score(world["folder"], world["metadata"], world["answers"], clip, ref.CLEANED)
    assert not theirs["skipped"] and not any(r.get("dropped") for r in mine.values())
    _same_rows(mine, theirs["rows"], {})
    _same_cells(report, theirs["cells"])
    assert report["reading"] == {"reading": "cleaned"} and report["scorer"]["reading"] == "cleaned"


@pytest.mark.parametrize("switch", ["text", "clip_gold", "lev", "crop", "selection"])
def test_each_documented_difference_moves_some_row_of_the_fixture(world, clip, authors, switch):
    """Switched alone, each difference changes this fixture's numbers: the answers
    exercise all of them (and the table in docs/cooco.md measures them)."""
    one = dataclasses.replace(ref.AUTHORS, **{switch: getattr(ref.CLEANED, switch)})
    moved = ref.score(world["folder"], world["metadata"], world["answers"], clip, one)
    changed = set(moved["skipped"]) ^ set(authors["skipped"])
    for key in set(moved["rows"]) & set(authors["rows"]):
        a, b = moved["rows"][key], authors["rows"][key]
        if any((a[m] is None) != (b[m] is None) or (a[m] is not None and abs(a[m] - b[m]) > TOL) for m in ROW_METRICS):
            changed.add(key)
    assert changed, f"no row of the fixture moves when {switch} is switched"


def test_bat_is_a_correct_name_for_bat_sports_in_the_default_reading(ours_authors, world):
    mine, _ = ours(world, "cleaned")
    bats = [r for r in mine.values() if r["gold"] == "bat (sports)" and r["prediction"] == "bat"]
    assert bats and all(r["levenshtein_accuracy"] == 1.0 and r["accuracy"] == 1.0 for r in bats)
    assert all(r["text_similarity"] == pytest.approx(1.0, abs=1e-6) for r in bats)
    # and "bat (sports)" (a parenthetical no model says) is compared as "bat" too
    spelled = [r for r in mine.values() if r["gold"] == "bat (sports)" and r["output"] == "bat (sports)"]
    assert spelled and all(r["gold_name"] == "bat" for r in spelled)
    # the authors' reading: CLIP compares with their full label, Levenshtein without " (...)"
    theirs, _ = ours_authors
    bat = [r for r in theirs.values() if r["gold"] == "bat (sports)" and r["prediction"] == "bat"]
    assert bat and all(r["levenshtein_accuracy"] == 1.0 and r["text_similarity"] < 1.0 - 1e-6 for r in bat)


def test_their_gold_spelling_keeps_baseballs_trailing_space(world):
    doc = next(d for d in cooco.naming_docs(world["built"], reading="authors") if d["gold_label"] == "baseball")
    assert cooco.authors_spelling(doc, "gold") == "baseball " and doc["swapped_object"] == "baseball"
    assert world["metadata"][doc["image_id"] + ".jpg"]["swapped_object"] == "baseball_"


def test_boxes_are_float64_from_the_metadata_to_the_built_parquet_and_the_hub_path(world):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_cooco_release import hub_dataset

    schema = pq.read_schema(world["out"] / "data" / "test-00000-of-00001.parquet")
    assert schema.field("target_bbox").type.value_type == pa.float64()
    metadata = world["metadata"]
    for ds in (world["built"], cooco.ensure_schema(hub_dataset((world["folder"], metadata)))):
        boxes = {r["image_id"] + ".jpg": r["target_bbox"] for r in ds.select_columns(["image_id", "target_bbox"])}
        # exactly the metadata's numbers: COCO's 2-decimal floats survive (float32 would not)
        assert boxes == {name: [float(v) for v in meta["target_bbox"]] for name, meta in metadata.items()}
    doc = next(d for d in cooco.naming_docs(world["built"]) if d["condition"] == "original")
    meta_box = metadata[doc["image_id"] + ".jpg"]["target_bbox"]
    side, (_, _, w, h) = cooco.padded_geometry(doc)
    assert (w, h) == tuple(meta_box[2:]) and cooco.prompt_context(doc)["side"] == side


@pytest.mark.e2e
def test_a_harness_run_in_the_authors_reading_records_it(run_lmms_eval, world):
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "cooco_authors"],
        env={"LMMS_SCENE_CLIP_MODEL": str(world["clip"]), "LMMS_SCENE_COOCO_READING": "authors"},
        include=world["out"] / "tasks",
    )
    assert code == 0, log[-3000:]
    report = results["results"]["cooco_authors"]["cooco_breakdown,none"]
    assert report["reading"]["reading"] == "authors" and report["scorer"]["reading"] == "authors"
    assert report["selection"]["reading"] == "authors" and "refclipscore_median" in report["overall"]
    from conftest import find_samples

    rows = [s["cooco_breakdown"] for s in find_samples(out, "cooco_authors")]
    assert len(rows) == 19 and {r["reading"] for r in rows} == {"authors"}
    from lmms_scene.report.text import show_text

    flat = " ".join(show_text([out])[0].split())
    assert "COOCO Figure 3: median RefCLIPScore at noise level 0" in flat
    assert "Reading: scene_blind: authors (LMMS_SCENE_COOCO_READING=authors" in flat
    # a bad value stops the run before the model answers anything
    code, _results, _out, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "cooco_authors"],
        env={"LMMS_SCENE_CLIP_MODEL": str(world["clip"]), "LMMS_SCENE_COOCO_READING": "paper"},
        include=world["out"] / "tasks",
    )
    assert code != 0 and "LMMS_SCENE_COOCO_READING='paper'" in log

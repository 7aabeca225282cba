"""The duplicate-id checks of ``lmms-scene cesg`` / ``snus-ac`` (``cli.snus._unique_ids``)
and of the Layered-VQA builder (``data.layered_vqa.schema.repeated``), against the quadratic
``ids.count(i)`` checks they replaced (issue 16), in the same run on the same ids.

Ids: ``--n`` distinct strings plus one repeat at the end (the worst case: the whole list
is scanned). Figures: seconds per check and the ratio old / new. The old checks are
reproduced here (``[i for i in ids if ids.count(i) > 1]``), timed once (they are slow).

Usage: python bench/bench_duplicate_ids.py [--n 40000]
Prints one JSON object. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def _old(ids: list[str]) -> list[str]:
    return sorted({i for i in ids if ids.count(i) > 1})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=40_000)
    args = parser.parse_args()

    from lmms_scene.cli.snus import _unique_ids
    from lmms_scene.data.layered_vqa.schema import repeated

    ids = [f"id-{k:07d}" for k in range(args.n)] + ["id-0000000"]
    rows = [{"id": i, "_line": k + 1} for k, i in enumerate(ids)]
    out: dict[str, float | int] = {"n_ids": len(ids)}

    start = time.perf_counter()
    found = repeated(ids)
    out["layered_vqa_repeated_s"] = time.perf_counter() - start
    assert found == ["id-0000000"]

    start = time.perf_counter()
    try:
        _unique_ids(rows, Path("ids.jsonl"))
    except ValueError:
        pass
    out["cesg_unique_ids_s"] = time.perf_counter() - start

    start = time.perf_counter()
    assert _old(ids) == ["id-0000000"]
    out["quadratic_s"] = time.perf_counter() - start
    out["ratio_quadratic_over_repeated"] = out["quadratic_s"] / max(out["layered_vqa_repeated_s"], 1e-9)
    out["ratio_quadratic_over_unique_ids"] = out["quadratic_s"] / max(out["cesg_unique_ids_s"], 1e-9)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

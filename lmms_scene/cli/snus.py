"""SNUS commands: ``cesg`` (score prediction/reference pairs), ``snus-ac`` (the AC stress
test: references with negation stripped, scored by every metric), ``build snus``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lmms_scene import settings
from lmms_scene.data import snus
from lmms_scene.data.snus import SAMPLE_FILE, tasks_folder
from lmms_scene.files import iter_jsonl
from lmms_scene.judges import parse_judges
from lmms_scene.metrics.cesg import score_corpus
from lmms_scene.metrics.cesg.agreement import STATISTICS, agreement, check_finite, finite_or_none, weight_grid
from lmms_scene.metrics.cesg.judges import SynonymVerifier
from lmms_scene.metrics.cesg.match import DEFAULT_LAMBDA
from lmms_scene.metrics.snus import scoring as report
from lmms_scene.metrics.snus import tables as snus_tables
from lmms_scene.metrics.snus.scoring import samples_rows
from lmms_scene.results import markdown_table, with_interval


def _read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for n, row in iter_jsonl(path):
        missing = [f for f in required if f not in row]
        if missing:
            raise ValueError(
                f"{path}, line {n}: missing field(s) {missing}; a row is {{{', '.join(map(repr, required))}}}"
            )
        refs = row.get("references")
        if refs is not None:
            if isinstance(refs, str):
                row["references"] = [refs]
            elif not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
                raise ValueError(
                    f"{path}, line {n}: field 'references': expected a string or a non-empty list of strings, got {refs!r}"
                )
        if "prediction" in required and not isinstance(row["prediction"], str):
            raise ValueError(f"{path}, line {n}: field 'prediction': expected a string, got {row['prediction']!r}")
        row["_line"] = n
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _unique_ids(rows: list[dict[str, Any]], path: Path, field: str = "id") -> None:
    """Every row's ``field`` distinct once written as text (``1`` and ``"1"`` are one id
    in a report): a repeat is an error naming both lines. One pass (a set)."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = str(row[field])
        if key in seen:
            first = seen[key]
            raise ValueError(
                f"{path}, line {row['_line']}: field {field!r}: {row[field]!r} repeats the id {first[field]!r} of line "
                f"{first['_line']} (ids are compared as text); give every row its own id"
            )
        seen[key] = row


def _options(args) -> dict[str, Any]:
    lam = settings.parse_unit(args.lambda_, "--lambda")
    opts: dict[str, Any] = {
        "coref": args.coref,
        "parser": args.parser,
        "lambda_": lam,
        "synonyms": not args.no_synonyms,
    }
    opts["encoder"] = None if args.encoder == "none" else settings.check_text(args.encoder, "--encoder")
    if args.weights:
        opts["weights"], note = settings.parse_weights(args.weights, "--weights")
        if note:
            print(f"lmms-scene cesg: {note}", file=sys.stderr)
    if getattr(args, "verifier", None):
        judges = parse_judges(args.verifier)
        if len(judges) != 1:
            raise ValueError(f"--verifier: expected one judge, got {len(judges)}")
        opts["verifier"] = SynonymVerifier(judges[0])
    return opts


def register(sub) -> None:
    c = sub.add_parser("cesg", help="CESG scores of prediction/reference pairs (JSONL)", description=__doc__)
    c.add_argument("--input", required=True, type=Path, help='JSONL rows {"id", "prediction", "references"}')
    c.add_argument("--json", action="store_true", help="print the per-row scores, means, counts and provenance as JSON")
    c.add_argument("--coref", default="rule", choices=["rule", "lingmess"])
    c.add_argument("--parser", default="rule", choices=["rule", "factual", "discosg"])
    c.add_argument(
        "--encoder",
        default="default",
        help="sentence encoder: default (MiniLM, offline), simcse, a name or folder, or none",
    )
    c.add_argument("--lambda", dest="lambda_", type=float, default=None, help="interactive-matching threshold")
    c.add_argument("--weights", default=None, help="w_o,w_a,w_r (default 0.5,0.25,0.25)")
    c.add_argument("--no-synonyms", action="store_true", help="switch WordNet synonym matching off")
    c.add_argument(
        "--verifier",
        default=None,
        metavar="JUDGE",
        help="LLM synonym verifier Q_v, e.g. 'qwen=Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1' "
        "(lmms_scene.judges spec; failures are listed per row, never scored)",
    )
    c.set_defaults(fn=_cesg, command_name="cesg")

    a = sub.add_parser("snus-ac", help="the AC stress test: references with negation stripped, scored by every metric")
    src = a.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", type=Path, help='JSONL rows {"id", "references"}')
    src.add_argument("--sample", action="store_true", help="the embedded SNUS sample's captions")
    a.add_argument("--json", action="store_true")
    a.set_defaults(fn=_snus_ac, command_name="snus-ac")

    g = sub.add_parser(
        "agreement", help="metric-versus-judge agreement (SNUS Table 3) and the CESG weight grid (Table 4)"
    )
    g.add_argument(
        "--input",
        required=True,
        type=Path,
        help="JSONL rows with an image id, per-sample metric scores and the judge/human score; "
        "with --judges: a SNUS samples file (--log_samples), whose rows carry their scores",
    )
    g.add_argument(
        "--judges",
        type=Path,
        default=None,
        help="JSONL rows {image id, target}: judge/human scores joined by image id to the samples file given as --input",
    )
    g.add_argument("--target", default="human", help="field holding the judge or human score (default: human)")
    g.add_argument(
        "--metrics", default=None, help="comma-separated metric fields (default: every numeric field but the target)"
    )
    g.add_argument(
        "--group", default="image_id", help="field naming the image (pairwise accuracy within it; bootstrap clusters)"
    )
    g.add_argument(
        "--weights", action="store_true", help="also evaluate Table 4's (w_o, w_a, w_r) grid from F1_o, F1_a, F1_r"
    )
    g.add_argument("--n-boot", type=int, default=1000)
    g.add_argument("--json", action="store_true")
    g.set_defaults(fn=_agreement, command_name="agreement")


def _cesg(args) -> int:
    if args.lambda_ is None:
        args.lambda_ = DEFAULT_LAMBDA
    options = _options(args)  # a bad option stops here, before the input is read or a model loads
    rows = _read_jsonl(args.input, ("id", "prediction", "references"))
    _unique_ids(rows, args.input)
    result = score_corpus([(r["id"], r["prediction"], r["references"]) for r in rows], **options)
    if args.json:
        json.dump(finite_or_none(result), sys.stdout, indent=1, default=str, allow_nan=False)
        print()
        return 0
    keys = ("CESG", "F1_o", "F1_a", "F1_r", "P_o", "R_o", "P_a", "R_a", "P_r", "R_r")
    print(
        markdown_table(["id", *keys, "status"], [[r["id"], *(r[k] for k in keys), r["status"]] for r in result["rows"]])
    )
    print()
    print(markdown_table(["corpus", *keys], [["paper's convention", *(result["means"][k] for k in keys)]]))
    rc = result["row_counts"]
    print(
        "\nrows behind each mean: "
        + ", ".join(f"{k} {rc[k]}" for k in sorted(rc))
        + " (P_t: rows whose prediction states a type-t element; R_t: rows whose reference does; F1_t = HM(P_t, R_t))"
    )
    print(
        f"\n{result['n_scored']} of {result['n']} rows scored; {result['n_reference_without_absent_information']} references without "
        f"absent information excluded; {result['n_empty_prediction']} empty predictions and "
        f"{result['n_prediction_without_absent_information']} predictions without absent information scored 0; "
        f"{result['n_parse_failures']} sentence parse failures."
    )
    prov = result["provenance"]
    print(
        f"CESG components: coref={prov['coref']}; parser={prov['parser']}; similarity={prov['similarity_model']}; "
        f"lambda={prov['interactive_lambda']}; weights={prov['weights']}"
    )
    return 0


def _snus_ac(args) -> int:
    if args.sample:
        import datasets  # deferred: datasets (pyarrow, pandas) is heavy to import

        ds = datasets.load_dataset("parquet", data_files={"test": str(tasks_folder() / SAMPLE_FILE)}, split="test")
        rows = [{"image_id": d["image_id"], "references": [d["caption"]]} for d in ds]
    else:
        read = _read_jsonl(args.input, ("id", "references"))
        _unique_ids(read, args.input)
        rows = [{"image_id": str(r["id"]), "references": r["references"]} for r in read]
    report.preflight(clip_metrics=False)  # no images here: CLIPScore is not computed
    rep = report.corpus_report([{**r, "output": ""} for r in rows])["ac"]
    if args.json:
        json.dump(finite_or_none(rep), sys.stdout, indent=1, default=str, allow_nan=False)
        print()
        return 0

    print(snus_tables.table2([(snus_tables.AC_LABEL, rep)]).text())
    print("\nscores x100. The baselines reward the affirmative opposite of the truth; CESG gives it 0.")
    return 0


def _agreement(args) -> int:
    if args.judges is not None:
        judges = _read_jsonl(args.judges, (args.group, args.target))
        check_finite(judges, [args.target], lambda i: f"{args.judges}, line {judges[i]['_line']}")
        _unique_ids(judges, args.judges, args.group)
        judged = {str(r[args.group]): r[args.target] for r in judges}
        rows = [{**r, args.target: judged.get(r["image_id"])} for r in samples_rows(args.input)]
        if args.group != "image_id":
            rows = [{**r, args.group: r["image_id"]} for r in rows]
        rows = [{k: v for k, v in r.items() if k not in ("output", "status")} for r in rows]
    else:
        rows = _read_jsonl(args.input, (args.group, args.target))
    if args.metrics:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    else:
        # a column is a metric when any row (not only the first) holds a number in it
        skip = {args.group, args.target, "id", "_line"}
        numeric = [k for r in rows for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        metrics = [k for k in dict.fromkeys(numeric) if k not in skip]
    if not metrics:
        raise ValueError(f"{args.input}: no numeric metric fields besides {args.target!r}; give --metrics")
    check_finite(rows, [*metrics, args.target], lambda i: f"{args.input}, line {rows[i].get('_line', i + 1)}")
    result = agreement(rows, metrics, args.target, args.group, n_boot=args.n_boot)
    grid = weight_grid(rows, args.target, group=args.group, n_boot=args.n_boot) if args.weights else None
    if args.json:
        # strict JSON: a statistic that is not computed is null, never NaN
        json.dump(finite_or_none({"agreement": result, "weights": grid}), sys.stdout, indent=1, allow_nan=False)
        print()
        return 0

    def cells(entry):
        return [with_interval(entry[s]["value"], entry[s]["ci95"]) for s in STATISTICS]

    print(f"## Table 3: agreement with {args.target!r} (value [95% CI], images resampled, {args.n_boot} resamples)\n")
    print(
        markdown_table(
            ["metric", "n", "excluded", *STATISTICS],
            [[m, e["n"], e["excluded"], *cells(e)] for m, e in result["metrics"].items()],
        )
    )
    if grid:
        print("\n## Table 4: CESG weights\n")
        print(
            markdown_table(
                ["w_o", "w_a", "w_r", "n", *STATISTICS],
                [[f"{g['w_o']:.2f}", f"{g['w_a']:.2f}", f"{g['w_r']:.2f}", g["n"], *cells(g)] for g in grid],
            )
        )
    return 0


def register_build(builds) -> None:
    p = builds.add_parser(
        "snus",
        help="convert a local SNUS release (images + metadata) into a dataset plus a task",
        description="Convert a local SNUS release into parquet splits with explicit Features and a card; "
        "with --name also write a task YAML that evaluates its test split.",
    )
    p.add_argument(
        "--from-folder",
        required=True,
        type=Path,
        metavar="DIR",
        help="folder with the images and metadata.{jsonl,json,csv}",
    )
    p.add_argument(
        "--metadata",
        type=Path,
        help="metadata file (default: DIR/metadata.*); fields image, caption, "
        "missing_objects, missing_attributes, missing_relations, scene, split",
    )
    p.add_argument(
        "--out",
        required=True,
        type=Path,
        help="output folder: data/<split>-00000-of-00001.parquet, README.md, tasks/snus_<name>.yaml",
    )
    p.add_argument("--name", default=None, help="task name suffix (default: the --out folder's name)")
    p.set_defaults(fn=_build, command_name="build snus")


def _build(args) -> int:
    dataset = snus.build(args.from_folder, args.metadata)
    card = snus.card(dataset, f"the local release {args.from_folder.resolve()}")
    written = snus.write_local(dataset, args.out, card, name=args.name)
    for path in [*written["splits"], written["card"]]:
        print(path)
    if written["tasks"]:
        print(f"tasks: {', '.join(written['tasks'])} in {written['include_path']}")
        print(f"run it: {snus.evaluate_command(written)}")
    return 0

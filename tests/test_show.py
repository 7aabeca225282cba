"""``lmms-scene show`` as a person at a terminal meets it: lines that fit the terminal, two
settings of one model shown as two labelled rows, and no traceback when the reader of a
pipe stops early (``| head``).

The results are the hand-built ones of tests/test_report.py (the report dicts the tasks
write, with known numbers), so nothing here loads a model or runs the harness."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_report import cooco_breakdown, model_run, write_run

from lmms_scene import cli


def _lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.fixture
def one_model(tmp_path) -> Path:
    model_run(tmp_path / "modelA", "modelA", 0.0)
    return tmp_path / "modelA"


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_show_fits_the_terminal_width_that_columns_names(one_model, monkeypatch, capsys, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert cli.main(["show", str(one_model)]) == 0
    out = capsys.readouterr().out
    longest = max(map(len, _lines(out)))
    assert longest <= columns, [line for line in _lines(out) if len(line) > columns][:3]
    # wide tables were cut into blocks, not dropped: every condition row is still there
    assert "same_target" in out and "RefCLIPScore" in out


def test_width_flag_wins_over_the_terminal_and_zero_means_no_limit(one_model, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["show", str(one_model), "--width", "100"]) == 0
    cut = _lines(capsys.readouterr().out)
    assert max(map(len, cut)) <= 100 and max(map(len, cut)) > 60
    assert cli.main(["show", str(one_model), "--width", "0"]) == 0
    whole = _lines(capsys.readouterr().out)
    assert max(map(len, whole)) > 100  # one table per figure, uncut
    assert cli.main(["show", str(one_model), "--width", "-3"]) == 2
    assert "--width: -3 is negative" in capsys.readouterr().err


def test_two_settings_of_one_model_class_are_two_labelled_rows(tmp_path, capsys):
    from lmms_scene.results import label_runs, load

    for folder, args, offset in (("a", "prior=scene", 0.0), ("b", "prior=uniform", 0.1)):
        write_run(
            tmp_path / folder,
            "scene_blind",
            args,
            {"cooco_sample": {"cooco_breakdown": cooco_breakdown(offset, noise=False), "refclipscore": 0.5}},
        )
    loaded = load([tmp_path])
    labels, notes = label_runs(loaded.results)
    assert sorted(labels.values()) == ["scene_blind (prior=scene)", "scene_blind (prior=uniform)"] and not notes
    assert cli.main(["show", str(tmp_path), "--width", "0"]) == 0
    out = capsys.readouterr().out
    # each setting keeps its own numbers in its own column (Figure 3, high, no noise: 0.52, 0.62)
    lines = _lines(out)
    at = next(i for i, line in enumerate(lines) if line.startswith("## COOCO Figure 3: RefCLIPScore"))
    header = next(line for line in lines[at:] if line.startswith("| "))
    high = next(line for line in lines[at:] if line.startswith("| high |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    values = [c.strip() for c in high.strip("|").split("|")]
    assert values[columns.index("scene_blind (prior=scene)")].startswith("0.520"), (header, high)
    assert values[columns.index("scene_blind (prior=uniform)")].startswith("0.620"), (header, high)


def test_one_setting_keeps_the_plain_model_name(tmp_path):
    from lmms_scene.results import label_runs, load

    model_run(tmp_path / "a", "modelA", 0.0)
    model_run(tmp_path / "b", "modelB", 0.1)
    labels, _ = label_runs(load([tmp_path]).results)
    assert set(labels.values()) == {"modelA", "modelB"}


@pytest.mark.slow
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    # enough results that the output outgrows the pipe's buffer, so the write meets the
    # closed pipe (the case `lmms-scene show results | head` is)
    for k in range(12):
        model_run(tmp_path / f"m{k}", f"model{k}", k / 100)
    script = (
        f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'lmms_scene.cli', 'show', {str(tmp_path)!r}, '--width', '40'], "
        "stdout=subprocess.PIPE, stderr=subprocess.PIPE); p.stdout.readline(); p.stdout.close(); "
        "err = p.stderr.read().decode(); sys.stdout.write(f'{p.wait()}\\n{err}')"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    code, _, err = proc.stdout.partition("\n")
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code in ("0", "141"), (code, err)

"""Table 3 agreement statistics, Table 4 weight grid, and CESG's judge paths."""

from __future__ import annotations

import json

import pytest

from lmms_scene.metrics.cesg.agreement import TABLE4_WEIGHTS, agreement, statistics, weight_grid

pytestmark = pytest.mark.slow


def test_statistics_on_hand_made_scores():
    s = statistics([1, 2, 3, 4], [10, 20, 30, 40], ["a", "a", "b", "b"])
    assert s["pearson_r"] == pytest.approx(1) and s["r2"] == pytest.approx(1)
    assert s["kendall_tau"] == pytest.approx(1) and s["spearman_rho"] == pytest.approx(1)
    assert s["pairwise_accuracy"] == 1.0
    # within image "a" the metric orders the pair the wrong way; image "b" tied metric: half
    s = statistics([2, 1, 5, 5], [1, 2, 3, 4], ["a", "a", "b", "b"])
    assert s["pairwise_accuracy"] == pytest.approx(0.25)


def test_agreement_excludes_and_counts_missing_scores():
    rows = [{"image_id": i // 2, "m": float(i), "human": float(i) * 2} for i in range(10)]
    rows[3]["human"] = None  # a judge failure
    res = agreement(rows, ["m"], "human", n_boot=50)["metrics"]["m"]
    assert res["n"] == 9 and res["excluded"] == 1
    assert res["pearson_r"]["value"] == pytest.approx(1) and res["pearson_r"]["ci95"] is not None
    with pytest.raises(KeyError, match="grouping field"):
        agreement([{"m": 1, "human": 1}], ["m"], "human")


def test_weight_grid_recomputes_cesg():
    rows = [{"image_id": i, "F1_o": i / 10, "F1_a": 0.5, "F1_r": (10 - i) / 10, "human": i / 10} for i in range(10)]
    grid = weight_grid(rows, "human", n_boot=20)
    assert len(grid) == len(TABLE4_WEIGHTS)
    by = {(g["w_o"], g["w_a"], g["w_r"]): g for g in grid}
    assert by[(1.0, 0.0, 0.0)]["pearson_r"]["value"] == pytest.approx(1)
    assert by[(0.0, 0.0, 1.0)]["pearson_r"]["value"] == pytest.approx(-1)
    assert by[(0.0, 1.0, 0.0)]["pearson_r"]["value"] is None  # constant metric: undefined
    with pytest.raises(ValueError, match="weights"):
        weight_grid(rows, "human", weights=[(1, 2)])


def test_agreement_command(tmp_path, capsys):
    from lmms_scene.cli import main

    path = tmp_path / "scores.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {"image_id": i // 3, "CESG": i % 5, "F1_o": i % 5, "F1_a": 1, "F1_r": 0, "human": i % 5 + (i % 2)}
            )
            for i in range(18)
        )
    )
    assert main(["agreement", "--input", str(path), "--target", "human", "--weights", "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "Table 3" in out and "Table 4" in out and "| CESG | 18 | 0 |" in out


class FakeClient:
    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts = []

    def evaluate(self, request):
        from types import SimpleNamespace

        self.prompts.append(request.messages[0]["content"])
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return SimpleNamespace(success=True, content=reply)


def test_synonym_verifier_goes_through_the_strict_parser():
    from lmms_scene.judges import JudgeSpec
    from lmms_scene.metrics.cesg import cesg_score
    from lmms_scene.metrics.cesg.judges import SynonymVerifier

    spec = JudgeSpec(name="j", model="m", provider="dummy")
    # a pair WordNet does not link (helmet ~ hard hat is now a direct WordNet kind), so the verifier is asked
    yes = SynonymVerifier(spec, client=FakeClient(["Yes."] * 10))
    s = cesg_score("There is no visor.", "There is no face shield.", encoder=None, verifier=yes)
    assert s["F1_o"] == 1.0 and yes.replies[0]["status"] == "yes"
    loose = SynonymVerifier(spec, client=FakeClient(["Not correct."] * 10))  # lmms-eval would read this as yes
    s = cesg_score("There is no visor.", "There is no face shield.", encoder=None, verifier=loose)
    assert s["F1_o"] == 0.0
    failing = SynonymVerifier(spec, client=FakeClient([TimeoutError("slow")] * 10))
    s = cesg_score("There is no visor.", "There is no face shield.", encoder=None, verifier=failing)
    assert s["F1_o"] == 0.0 and s["judge_failures"] == ["visor ~ face shield"]
    assert failing.replies[0]["status"] == "timeout"


def test_extra_judge_sees_the_reference():
    from lmms_scene.judges import JudgeSpec
    from lmms_scene.metrics.cesg import cesg_score
    from lmms_scene.metrics.cesg.judges import ExtraJudge

    client = FakeClient(["yes"])
    judge = ExtraJudge(JudgeSpec(name="j", model="m", provider="dummy"), "There is no guardrail.", client=client)
    s = cesg_score("There is no guardrail and no ladder.", "There is no guardrail.", encoder=None, extra_judge=judge)
    assert s["P_o"] == 1.0 and "There is no guardrail." in client.prompts[0] and "'ladder'" in client.prompts[0]


def _gamma_by_pairs(x, y):
    # the definition, pair by pair (independent of the O(n log n) implementation)
    concordant = discordant = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            s = (x[i] - x[j]) * (y[i] - y[j])
            concordant += s > 0
            discordant += s < 0
    return (concordant - discordant) / (concordant + discordant) if concordant + discordant else None


def test_goodman_kruskal_gamma_against_an_independent_computation():
    import random

    from lmms_scene.metrics.cesg.agreement import goodman_kruskal_gamma

    rng = random.Random(7)
    for n in (5, 40, 120):
        x = [rng.randint(0, 5) for _ in range(n)]  # many ties, as judge scores have
        y = [v + rng.choice([-2, -1, 0, 1, 2, 3]) for v in x]
        assert goodman_kruskal_gamma(x, y) == pytest.approx(_gamma_by_pairs(x, y), abs=1e-12)
    assert goodman_kruskal_gamma([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert goodman_kruskal_gamma([1, 1, 1], [1, 2, 3]) is None  # every pair tied in x
    # gamma ignores ties that tau-b penalises: it is at least as large in magnitude
    x, y = [0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 3]
    s = statistics(x, y, ["a"] * 6)
    assert (
        s["goodman_kruskal_gamma"] == pytest.approx(_gamma_by_pairs(x, y))
        and s["goodman_kruskal_gamma"] >= s["kendall_tau"]
    )

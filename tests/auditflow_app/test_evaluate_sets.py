"""``auditflow evaluate`` over several data sets and seeds: each (set, seed) evaluated into its own
files, and the per-set and pooled figures recomputed here from those files with ``statistics``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from auditflow_app import cli
from ingest.synthetic import generate, write_dataset

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setattr(cli, "console", Console(width=200))


@pytest.fixture
def small_models(monkeypatch):
    """Smaller boosters than the shipped ones (the figures here are checked for their arithmetic,
    not their quality): the same protocol, a fraction of the training time."""
    from model_service import evaluation
    from model_service.scorer import BoosterParams

    monkeypatch.setattr(evaluation, "EVAL_PARAMS", BoosterParams(n_estimators=30, max_depth=4, scale_pos_weight=10.0))


def test_several_sets_and_seeds_give_per_set_and_pooled_figures(history, tmp_path: Path, small_models):
    _, first = history
    slow = generate(accounts=100, days=6, laundering_rate=0.04, seed=4, profile="slow")
    second, _ = write_dataset(slow, tmp_path / "slow", name="slow")
    out = tmp_path / "eval"
    result = runner.invoke(cli.app, ["evaluate", str(first), str(second), "--seeds", "3,5", "--out", str(out),
                                     "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    summary = json.loads(result.output)
    assert summary["sets"] == [first.stem, second.stem] and summary["seeds"] == [3, 5]
    assert json.loads((out / "evaluation_summary.json").read_text()) == summary

    figures: dict[str, dict[str, dict[str, list[float]]]] = {}
    for name in summary["sets"]:
        for seed in (3, 5):
            ev = json.loads((out / name / f"seed-{seed}" / "evaluation.json").read_text())
            assert ev["seed"] == seed
            n_test = ev["split_events"]["test"]
            for model, m in ev["models"].items():
                got = figures.setdefault(name, {}).setdefault(model, {})
                got.setdefault("f1", []).append(m["test"]["f1"])
                got.setdefault("pr_auc", []).append(m["pr_auc"])
                got.setdefault("precision_at_budget", []).append(m["precision_at_budget"])
                got.setdefault("alerts_per_10k", []).append(10_000 * m["test"]["flagged"] / n_test)
    # the field's reference recipe (GFP) and its combinations are in the same run
    assert set(figures[first.stem]) == {"baseline", "stream", "graph", "gfp", "gfp_stream", "gfp_one_hop",
                                      "gfp_graph"}
    for name, models in figures.items():
        for model, figs in models.items():
            for fig, values in figs.items():
                assert summary["per_set"][name][model][fig]["mean"] == pytest.approx(statistics.fmean(values))
                assert summary["per_set"][name][model][fig]["sd"] == pytest.approx(statistics.stdev(values))
    for model in ("baseline", "stream", "graph", "gfp"):
        for fig in ("f1", "pr_auc", "precision_at_budget", "alerts_per_10k"):
            means = [statistics.fmean(figures[name][model][fig]) for name in summary["sets"]]
            assert summary["pooled"][model][fig]["mean"] == pytest.approx(statistics.fmean(means))
            assert summary["pooled"][model][fig]["sd"] == pytest.approx(statistics.stdev(means))
    # the two seeds trained different models on the same features: not one figure repeated
    assert figures[first.stem]["graph"]["pr_auc"][0] != figures[first.stem]["graph"]["pr_auc"][1]

    console = Console(width=200, record=True)
    console.print(cli._multi_evaluation_table(summary))  # what the command prints without --json
    lines = console.export_text().splitlines()
    graph_pooled = next(line for line in lines if "pooled" in line and " graph " in line)
    f1 = summary["pooled"]["graph"]["f1"]
    assert f"{f1['mean']:.3f} +- {f1['sd']:.3f}" in graph_pooled
    assert sum(first.stem in line for line in lines) == 7 and sum(second.stem in line for line in lines) == 7


@pytest.mark.parametrize("seeds", ["3,x", "3,3", ","])
def test_a_bad_seed_list_is_one_line_and_exit_2(history, tmp_path: Path, seeds: str):
    _, first = history
    result = runner.invoke(cli.app, ["evaluate", str(first), "--seeds", seeds, "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert f"--seeds={seeds!r}" in result.output and "Traceback" not in result.output


def test_two_sets_with_one_file_name_are_refused(history, tmp_path: Path):
    _, first = history
    twin = tmp_path / "other" / first.name
    twin.parent.mkdir()
    twin.write_bytes(first.read_bytes())
    result = runner.invoke(cli.app, ["evaluate", str(first), str(twin), "--out", str(tmp_path / "e")])
    assert result.exit_code == 2 and "share a file name" in result.output

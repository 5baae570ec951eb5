"""The layering holds: import-linter checks the contracts of ``[tool.importlinter]`` in
pyproject.toml over the real packages (every import, those inside functions too), and the same
contracts are shown to catch a breach on a small tree built here."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

STAGES = ("ingest", "pipelines", "evidence_graph", "model_service", "reports", "cases")
CORE, STAGES_RULE, MODEL = ("the core imports no stage and not the app layer", "stages never import the app layer",
                            "the model service does not import the stream job")


def contracts() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def lint(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} missing: make setup installs import-linter (the test extra)")
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_contracts_say_what_the_layering_is():
    by_name = {c["name"]: c for c in contracts()["contracts"]}
    core = by_name[CORE]
    assert core["source_modules"] == ["auditflow"]
    assert set(core["forbidden_modules"]) == {"auditflow_app", *STAGES}
    stages = by_name[STAGES_RULE]
    assert set(stages["source_modules"]) == set(STAGES) and stages["forbidden_modules"] == ["auditflow_app"]
    model = by_name[MODEL]
    assert model["source_modules"] == ["model_service"] and model["forbidden_modules"] == ["pipelines"]
    assert all(c["type"] == "forbidden" for c in by_name.values())


def test_the_packages_keep_every_contract():
    result = lint(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(("module", "imports", "broken"), [
    ("auditflow/money.py", "import evidence_graph.store", {CORE}),
    # a stage reaching the app layer through the core it imports breaks both rules
    ("auditflow/records.py", "from auditflow_app import settings", {CORE, STAGES_RULE}),
    ("ingest/reader.py", "def f():\n    from auditflow_app.settings import Settings", {STAGES_RULE}),
    ("pipelines/job.py", "import auditflow_app.settings", {STAGES_RULE}),
    ("model_service/score.py", "import pipelines.job", {MODEL}),
])
def test_a_breach_is_caught(tmp_path: Path, module: str, imports: str, broken: set[str]):
    """The same contracts over a miniature of the layout, once with one forbidden import: that
    contract breaks, and only the contracts it breaches (an import inside a function counts; so
    does one reached through another package)."""
    tree = {f"{p}/__init__.py": "" for p in ("auditflow", "auditflow_app", *STAGES)}
    tree |= {"auditflow_app/settings.py": "import auditflow.money\nimport ingest.reader\n",
             "auditflow/money.py": "", "auditflow/records.py": "import auditflow.money\n",
             "evidence_graph/store.py": "import auditflow.records\n", "ingest/reader.py": "",
             "pipelines/job.py": "import evidence_graph.store\n", "model_service/score.py": "",
             "reports/pdf.py": ""}
    for rel, text in tree.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    config = tmp_path / "layers.toml"
    lines = [f"[tool.importlinter]\nroot_packages = {contracts()['root_packages']!r}\n".replace("'", '"')]
    for c in contracts()["contracts"]:
        lines.append(textwrap.dedent(f"""
            [[tool.importlinter.contracts]]
            name = "{c['name']}"
            type = "{c['type']}"
            source_modules = {c['source_modules']!r}
            forbidden_modules = {c['forbidden_modules']!r}
            """).replace("'", '"'))
    config.write_text("".join(lines))

    clean = lint(config, tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    (tmp_path / module).write_text(imports + "\n")
    breached = lint(config, tmp_path)
    assert breached.returncode != 0
    for name in (CORE, STAGES_RULE, MODEL):
        assert f"{name} {'BROKEN' if name in broken else 'KEPT'}" in breached.stdout
    assert f"{3 - len(broken)} kept, {len(broken)} broken" in breached.stdout

"""The layers hold (pyproject.toml's import-linter contracts), and an import that breaks one
fails the check: shown on a copy of the code with one such import added."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_code_keeps_every_import_contract(repo):
    done = lint_imports(repo)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "sneaked_import", "contract"),
    [
        ("quotaportal/quotas/errors.py", "import quotaportal.web.views", "Arrows point down"),
        ("quotaportal/api/pagination.py", "import quotaportal.web.forms", "Arrows point down"),
        ("scheduler/model.py", "import django", "The scheduler knows nothing"),
    ],
)
def test_an_import_against_the_arrows_breaks_a_contract(
    repo, tmp_path, module, sneaked_import, contract
):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(repo / "pyproject.toml", copy)
    for package in ("quotaportal", "scheduler"):
        shutil.copytree(repo / package, copy / package, ignore=shutil.ignore_patterns("*.pyc"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{sneaked_import}  # against the arrows\n")
    done = lint_imports(copy)
    assert done.returncode != 0
    assert f"{contract}" in done.stdout
    assert "BROKEN" in done.stdout


def test_no_test_module_imports_another_or_a_conftest(repo):
    """Shared builders live in builders modules; fixtures in conftest files, found by pytest."""
    import ast

    offenders = []
    for path in (repo / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("tests.")
            ):
                leaf = node.module.rsplit(".", 1)[-1]
                if leaf.startswith("test_") or leaf == "conftest":
                    offenders.append(f"{path.relative_to(repo)} imports {node.module}")
    assert offenders == []


def test_no_module_imports_itself_back_through_others():
    """No import cycle among quotaportal's modules, wherever the imports sit (grimp sees
    those inside functions too)."""
    import grimp

    graph = grimp.build_graph("quotaportal")
    cycles = [
        (module, other)
        for module in graph.modules
        if "migrations" not in module
        for other in graph.find_modules_directly_imported_by(module)
        if other != module and graph.chain_exists(importer=other, imported=module)
    ]
    assert cycles == []


def test_no_module_is_over_400_lines(repo):
    """Rooms an engineer can take in: a module that grows past this splits along its seams."""
    long = [
        f"{path.relative_to(repo)}: {lines} lines"
        for folder in ("quotaportal", "scheduler", "scripts", "qp")
        for path in (repo / folder).rglob("*.py")
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > 400
    ]
    assert long == []


def test_every_module_of_the_control_plane_sits_in_a_layer(repo):
    """The layers contract says where each module may import from; a module in none of its
    rows is checked by nothing, so a new top-level module or subpackage must be placed."""
    import tomllib

    config = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    placed = {name.strip() for row in layers for name in re.split(r"[|:]", row)}

    def covered(module: str) -> bool:
        parts = module.split(".")
        return any(".".join(parts[:n]) in placed for n in range(1, len(parts) + 1))

    modules = [
        ".".join(path.relative_to(repo).with_suffix("").parts).removesuffix(".__init__")
        for path in (repo / "quotaportal").rglob("*.py")
        if "__pycache__" not in path.parts
    ]
    # The project's package itself and its settings sit above every layer (Django loads
    # them); the awsbatch package's parts are placed one by one, its __init__ imports nothing.
    outside = {"quotaportal", "quotaportal.settings", "quotaportal.awsbatch"}
    assert [m for m in sorted(modules) if m not in outside and not covered(m)] == []

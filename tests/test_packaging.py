"""The project as a package: the wheel holds only `frontierflow/…`, and the code is lint-
and type-clean (ruff and mypy, configured in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("pipelines", "schemas", "state", "connectors")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("src")
    # build from a copy so no build/ or egg-info lands in the checkout
    shutil.copytree(
        ROOT,
        build / "src",
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*_cache"),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(build / "src"),
        ],
        check=True,
    )
    (found,) = out.glob("frontierflow-*.whl")
    return found


def test_wheel_installs_only_under_frontierflow(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"frontierflow", next(t for t in tops if t.endswith(".dist-info"))}
    for sub in SUBPACKAGES:
        assert f"frontierflow/{sub}/__init__.py" in names
    assert "frontierflow/state/storage/rocksdb.py" in names  # a subpackage of a subpackage
    assert not any(name.startswith(("state/", "pipelines/", "tests/", "infra/")) for name in names)


def test_wheel_carries_schemas_graph_and_entry_point(wheel: Path) -> None:
    zf = zipfile.ZipFile(wheel)
    names = zf.namelist()
    for schema in ("fetch_event", "frontier_entry", "scaling_decision", "dead_letter"):
        assert f"frontierflow/schemas/{schema}.avsc" in names
    assert "frontierflow/connectors/graphs/uk-2007-05-100000.graph" in names
    assert "frontierflow/connectors/graphs/uk-2007-05-100000.properties" in names
    for page in ("index.html", "app.js", "app.css"):  # the operator's page
        assert f"frontierflow/pipelines/ui/static/{page}" in names
    (entry_points,) = [n for n in names if n.endswith("entry_points.txt")]
    assert "frontierflow = frontierflow.pipelines.cli:main" in zf.read(entry_points).decode()


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    subprocess.run([ruff, "check", "."], cwd=ROOT, check=True)
    subprocess.run([ruff, "format", "--check", "."], cwd=ROOT, check=True)


def test_mypy_clean(tmp_path: Path) -> None:
    """mypy on the package as it installs: a tree of links frontierflow/<sub> → <sub>/."""
    if shutil.which("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    pkg = tmp_path / "frontierflow"
    pkg.mkdir()
    for sub in SUBPACKAGES:
        (pkg / sub).symlink_to(ROOT / sub, target_is_directory=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "-p",
            "frontierflow",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_imports_point_one_way() -> None:
    """The contracts in pyproject.toml ([tool.importlinter]): schemas ← state ← connectors ←
    the step core ← strategies ← engines ← evaluation ← CLI, and the operators know
    connectors only through connectors.base. Run with this interpreter's import-linter."""
    pytest.importorskip("importlinter", reason="import-linter is not installed (.[dev])")
    code = "import sys; from importlinter.cli import lint_imports as f; sys.exit(f(no_cache=True))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout

"""Every command that needs an optional library says which extra to install when it is
missing: one line on stderr, exit code 2, no traceback. Each command runs in a fresh
interpreter whose `sys.modules` holds None for the library, which makes importing it fail
as if it were not installed."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from frontierflow.pipelines.cli import main, seed
from frontierflow.pipelines.cli.extras import EXTRAS, MissingExtra, missing_extra

ROOT = Path(__file__).resolve().parents[3]

DISTRIBUTIONS = {
    "aiohttp": "aiohttp",
    "protego": "protego",
    "grpcio": "grpc",
    "protobuf": "google.protobuf",
    "warcio": "warcio",
    "scrapy": "scrapy",
}
"""Each optional distribution of pyproject.toml → the module it installs."""

RUN_BLOCKED = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from frontierflow.pipelines.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_without(modules: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_BLOCKED, modules, *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_optional_distribution_names_its_extra() -> None:
    """EXTRAS is pyproject.toml's [project.optional-dependencies] (all but dev), by module."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    expected = {
        DISTRIBUTIONS[re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]]: extra
        for extra, requirements in extras.items()
        if extra != "dev"
        for requirement in requirements
    }
    assert expected == EXTRAS


@pytest.fixture
def warc_file(tmp_path: Path) -> Path:
    """A file the commands take for a WARC by its name and first bytes (it is never read:
    the reader is missing)."""
    path = tmp_path / "crawl.warc"
    path.write_bytes(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n\r\n")
    return path


@pytest.mark.parametrize(
    ("blocked", "argv", "command", "module", "extra"),
    [
        (
            "aiohttp",
            ["fetch", "--bootstrap-servers", "127.0.0.1:1", "--fetcher-id", "f"],
            "frontierflow fetch",
            "aiohttp",
            "fetcher",
        ),
        (
            "protego",
            ["fetch", "--bootstrap-servers", "127.0.0.1:1", "--fetcher-id", "f"],
            "frontierflow fetch",
            "protego",
            "fetcher",
        ),
        (
            "grpc",
            ["urlfrontier", "--state-dir", "{tmp}/s"],
            "frontierflow urlfrontier",
            "grpc",
            "urlfrontier",
        ),
        (
            "google.protobuf",
            ["urlfrontier", "--state-dir", "{tmp}/s"],
            "frontierflow urlfrontier",
            "google.protobuf",
            "urlfrontier",
        ),
        ("grpc", ["bench", "urlfrontier"], "frontierflow bench urlfrontier", "grpc", "urlfrontier"),
        ("grpc", ["bench-urlfrontier"], "frontierflow bench-urlfrontier", "grpc", "urlfrontier"),
        ("warcio", ["bench", "warc", "{warc}"], "frontierflow bench warc", "warcio", "warc"),
        (
            "warcio",
            ["warc-to-events", "{warc}", "{tmp}/events.avro"],
            "frontierflow warc-to-events",
            "warcio",
            "warc",
        ),
        (
            "warcio",
            ["replay", "{warc}", "--state-dir", "{tmp}/s", "--out", "{tmp}/out.jsonl"],
            "frontierflow replay",
            "warcio",
            "warc",
        ),
    ],
)
def test_a_missing_library_names_the_extra(
    blocked: str,
    argv: list[str],
    command: str,
    module: str,
    extra: str,
    tmp_path: Path,
    warc_file: Path,
) -> None:
    args = [a.format(tmp=tmp_path, warc=warc_file) for a in argv]
    done = run_without(blocked, args)
    assert done.returncode == 2, done.stderr
    message = (
        f"{command} needs the '{extra}' extra ({module} is not installed): "
        f"pip install 'frontierflow[{extra}]'"
    )
    assert message in done.stderr.splitlines(), done.stderr
    assert "Traceback" not in done.stderr


def test_the_message_names_the_library_above_a_missing_submodule() -> None:
    """Without protobuf, importing `google.protobuf` fails on `google` (a namespace package
    nothing else provides); a missing submodule of an optional library names the library."""
    assert missing_extra(ModuleNotFoundError("no google", name="google")) == MissingExtra(
        "google.protobuf", "urlfrontier"
    )
    assert missing_extra(ModuleNotFoundError("x", name="warcio.recordloader")) == MissingExtra(
        "warcio", "warc"
    )


def test_an_error_raised_from_a_missing_library_names_the_extra() -> None:
    try:
        try:
            raise ModuleNotFoundError("no aiohttp", name="aiohttp")
        except ImportError as exc:
            raise ValueError("cannot fetch") from exc
    except ValueError as error:
        assert missing_extra(error) == MissingExtra("aiohttp", "fetcher")


def test_other_errors_are_not_taken_for_a_missing_extra() -> None:
    assert missing_extra(ModuleNotFoundError("no numpy", name="numpy")) is None
    assert missing_extra(ModuleNotFoundError("no grpcx", name="grpcx")) is None
    assert missing_extra(ValueError("bad option")) is None


def test_a_missing_core_library_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library every install has is a broken install, not an extra: its error stays."""

    def broken(args: object) -> int:
        raise ModuleNotFoundError("No module named 'kafka'", name="kafka")

    monkeypatch.setattr(seed, "seed", broken)
    with pytest.raises(ModuleNotFoundError, match="kafka"):
        main(["seed", "https://a.example/", "--bootstrap-servers", "127.0.0.1:1"])

"""Pytest plugin (not a test file): nginx serving HTML trees on 127.0.0.1, one virtual host
per tree, through ``infra/debian-docs/serve.sh`` (its config, pid and logs in a temporary
folder; stopped at the end of the test).

``nginx_sites({"a.test": folder, ...})`` starts it and returns a `NginxSites` whose
``requests()`` parses the access log. Without nginx the fixture skips (``.ci/run``
installs it).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SERVE = REPO / "infra" / "debian-docs" / "serve.sh"


@dataclass(frozen=True, slots=True)
class Request:
    """One access-log line: when the request started and ended (s), host, method, path,
    status."""

    start: float
    end: float
    host: str
    method: str
    path: str
    status: int


@dataclass(frozen=True, slots=True)
class NginxSites:
    rundir: Path
    port: int

    @property
    def access_log(self) -> Path:
        return self.rundir / "access.log"

    def requests(self) -> list[Request]:
        out = []
        for line in self.access_log.read_text().splitlines():
            msec, request_time, host, rest = line.split(" ", 3)
            request, _, tail = rest[1:].partition('" ')
            method, path, _proto = request.split(" ")
            status = int(tail.split(" ")[0])
            end = float(msec)
            out.append(Request(end - float(request_time), end, host, method, path, status))
        return out


def _nginx_missing() -> bool:
    return shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists()


@pytest.fixture
def nginx_sites(tmp_path: Path) -> Iterator[Callable[[dict[str, Path]], NginxSites]]:
    if _nginx_missing():
        pytest.skip("nginx is not installed (.ci/run installs it with apt-get)")
    rundirs: list[Path] = []

    def start(sites: dict[str, Path]) -> NginxSites:
        rundir = tmp_path / f"nginx-{len(rundirs)}"
        rundirs.append(rundir)
        pairs = [f"{name}={folder}" for name, folder in sites.items()]
        done = subprocess.run(
            ["bash", str(SERVE), "start", str(rundir), *pairs],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"nginx did not start:\n{done.stderr}", pytrace=False)
        addr = done.stdout.strip().splitlines()[-1]
        return NginxSites(rundir, int(addr.rsplit(":", 1)[1]))

    try:
        yield start
    finally:
        for rundir in rundirs:
            subprocess.run(["bash", str(SERVE), "stop", str(rundir)], timeout=60, check=False)

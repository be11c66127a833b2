"""Pytest plugin (not a test file): nginx serving HTML trees on 127.0.0.1, one virtual host
per tree, through ``infra/debian-docs/serve.sh`` (its config, pid and logs in a temporary
folder; stopped at the end of the test).

``nginx_sites({"a.test": folder, ...})`` starts it and returns a `NginxSites` whose
``requests()`` parses the access log; ``inside=`` (a command prefix such as ``ip netns exec
NS``) and ``address=`` start it in a network namespace, listening on that address. Without
nginx the fixture skips (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from frontierflow.pipelines.evaluation.realcrawl import AccessLine, read_access_log

REPO = Path(__file__).resolve().parent.parent
SERVE = REPO / "infra" / "debian-docs" / "serve.sh"


@dataclass(frozen=True, slots=True)
class NginxSites:
    rundir: Path
    port: int
    address: str = "127.0.0.1"

    @property
    def access_log(self) -> Path:
        return self.rundir / "access.log"

    def requests(self) -> list[AccessLine]:
        """Every request so far (start, end, host, method, path, status)."""
        return read_access_log(self.access_log)


def _nginx_missing() -> bool:
    return shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists()


@pytest.fixture
def nginx_sites(tmp_path: Path) -> Iterator[Callable[..., NginxSites]]:
    if _nginx_missing():
        pytest.skip("nginx is not installed (.ci/run installs it with apt-get)")
    rundirs: list[Path] = []

    def start(
        sites: dict[str, Path], inside: Sequence[str] = (), address: str = "127.0.0.1"
    ) -> NginxSites:
        rundir = tmp_path / f"nginx-{len(rundirs)}"
        rundirs.append(rundir)
        pairs = [f"{name}={folder}" for name, folder in sites.items()]
        done = subprocess.run(
            [*inside, "bash", str(SERVE), "start", str(rundir), *pairs],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "NGINX_ADDR": address},
        )
        if done.returncode != 0:
            pytest.fail(f"nginx did not start:\n{done.stderr}", pytrace=False)
        addr = done.stdout.strip().splitlines()[-1]
        return NginxSites(rundir, int(addr.rsplit(":", 1)[1]), address)

    try:
        yield start
    finally:
        for rundir in rundirs:
            subprocess.run(["bash", str(SERVE), "stop", str(rundir)], timeout=60, check=False)


class LinkedSite:
    """Writes small linked sites for crawl tests: `__call__` writes the pages with a port
    placeholder (the port is known once nginx runs), `fill_port` puts it in."""

    @staticmethod
    def __call__(
        root: Path,
        hosts: tuple[str, ...],
        pages: int,
        seed: int = 5,
        robots_host: str | None = None,
    ) -> dict[str, Path]:
        """`pages` pages per host (index.html, p1.html, ...): four links within the host,
        one to the next host, every tenth page one to a missing page; with `robots_host`,
        every page also links to that host's /private/secret.html. Texts mix "socket" and
        "tcp" with other words, so every page has some similarity to "socket tcp"."""
        rng = random.Random(seed)
        sites = {}
        for h, host in enumerate(hosts):
            folder = root / host
            folder.mkdir(parents=True)
            if host == robots_host:
                (folder / "private").mkdir()
                (folder / "private" / "secret.html").write_text("<html><body>socket</body></html>")
            for i in range(pages):
                links = [f"p{rng.randrange(1, pages)}.html" for _ in range(4)]
                other = hosts[(h + 1) % len(hosts)]
                links.append(f"http://{other}:{{port}}/p{rng.randrange(1, pages)}.html")
                if i % 10 == 3:
                    links.append("missing.html")
                if robots_host is not None:
                    links.append(f"http://{robots_host}:{{port}}/private/secret.html")
                words = ["socket"] * rng.randint(0, 4) + ["tcp"] * rng.randint(1, 4)
                words += ["kernel", "buffer", "queue"] * rng.randint(1, 3)
                rng.shuffle(words)
                body = " ".join(f'<a href="{link}">link</a>' for link in links)
                name = "index.html" if i == 0 else f"p{i}.html"
                text = f"<html><body><p>{' '.join(words)}</p>{body}</body></html>"
                (folder / name).write_text(text)
            sites[host] = folder
        return sites

    @staticmethod
    def fill_port(sites: dict[str, Path], port: int) -> None:
        for folder in sites.values():
            for page in folder.glob("*.html"):
                page.write_text(page.read_text().replace("{port}", str(port)))


@pytest.fixture
def linked_site() -> LinkedSite:
    return LinkedSite()

"""Debian's documentation packages as a recorded web: where infra/debian-docs unpacks them.

Four manuals (the kernel's, Python's, PostgreSQL's and the JDK's API) fetched by
infra/debian-docs/fetch.sh; each is served under its own base URL in the simulated web.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The Debian packages of infra/debian-docs/fetch.sh and the HTML root inside each one
#: (relative to <cache>/<package>/). openjdk-17-doc's own folder only holds symlinks into
#: openjdk-17-jre-headless, where dpkg put the pages.
DEBIAN_DOC_ROOTS: dict[str, str] = {
    "linux-doc-6.1": "usr/share/doc/linux-doc-6.1/html",
    "python3.11-doc": "usr/share/doc/python3.11/html",
    "postgresql-doc-15": "usr/share/doc/postgresql-doc-15/html",
    "openjdk-17-doc": "usr/share/doc/openjdk-17-jre-headless/api",
}


def debian_docs_dir() -> Path:
    """Where infra/debian-docs/fetch.sh unpacks the packages (same environment override)."""
    override = os.environ.get("DEBIAN_DOCS_CACHE")
    if override:
        return Path(override)
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "frontierflow" / "debian-docs"


def debian_doc_base(package: str) -> str:
    """The base URL a Debian documentation package is served under in the simulated web."""
    return f"https://{package}.docs.invalid/"

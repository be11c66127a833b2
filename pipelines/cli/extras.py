"""Which extra to install when a command's optional library is missing.

The optional libraries come with the extras of `[project.optional-dependencies]`: a command
that imports one without it ends in a one-line message naming the extra (exit code 2),
never a traceback. `main` asks `missing_extra` of every error a command raises.
"""

from __future__ import annotations

from dataclasses import dataclass

EXTRAS = {
    "aiohttp": "fetcher",
    "protego": "fetcher",
    "grpc": "urlfrontier",
    "google.protobuf": "urlfrontier",
    "warcio": "warc",
    "scrapy": "scrapy",
}
"""Top-level module → the extra that installs it (`frontierflow[extra]`)."""


@dataclass(frozen=True, slots=True)
class MissingExtra:
    """An optional module a command could not import, and the extra that brings it."""

    module: str
    extra: str

    def message(self, command: str) -> str:
        return (
            f"{command} needs the '{self.extra}' extra ({self.module} is not installed): "
            f"pip install 'frontierflow[{self.extra}]'"
        )


def missing_extra(error: BaseException) -> MissingExtra | None:
    """The optional module whose absence caused `error` (itself, or an error raised from it,
    such as the ValueError of a WARC reader without warcio); None for any other error."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            found = _optional_module(cause.name)
            if found is not None:
                return found
        cause = cause.__cause__ or cause.__context__
    return None


def _optional_module(name: str) -> MissingExtra | None:
    """`name` (as ModuleNotFoundError gives it: `grpc`, `google`, `warcio.recordloader`)
    when it is, or lies inside or above, one of the optional modules."""
    for module, extra in EXTRAS.items():
        if name == module or name.startswith(module + ".") or module.startswith(name + "."):
            return MissingExtra(module, extra)
    return None

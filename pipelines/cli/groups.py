"""Command groups: `frontierflow bench [WHAT]` and `frontierflow simulate [WHAT]`.

A group runs its default command when no WHAT is given (the group's own options are that
command's), or the member WHAT names. Each member is also accepted under its old name
(`bench-kafka`), hidden from `--help`, with a deprecation note (`renamed.COMMANDS`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from frontierflow.pipelines.cli import renamed


@dataclass(frozen=True, slots=True)
class Command:
    """One command: its line in `--help`, the function adding its options, its handler."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


def add_group(
    sub: argparse._SubParsersAction[Any],
    name: str,
    help: str,
    default: Command,
    members: Mapping[str, Command],
) -> None:
    """`frontierflow NAME [WHAT]` on `sub`, and the hidden old names of its members."""
    group = sub.add_parser(
        name,
        help=help,
        description=f"{help}. Without WHAT: {default.help}.",
    )
    default.arguments(group)
    group.set_defaults(handler=default.handler)
    whats = group.add_subparsers(dest="what", metavar="WHAT", title=f"{name} WHAT")
    for what, command in members.items():
        member = whats.add_parser(what, help=command.help, description=command.help)
        command.arguments(member)
        member.set_defaults(handler=command.handler)
    for old, (group_name, what) in renamed.COMMANDS.items():
        if group_name != name:
            continue
        command = members[what]
        hidden = sub.add_parser(old, description=command.help)  # no help=: not listed
        command.arguments(hidden)
        hidden.set_defaults(handler=command.handler, renamed=(old, f"{name} {what}"))

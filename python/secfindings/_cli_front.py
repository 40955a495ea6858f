"""The front doors' commands, registered on ``secfindings`` by one call from :mod:`secfindings.cli`:
``profile``, ``finding``, ``findings``, ``mcp``, ``-p/--profile`` everywhere, ``--profiles`` /
``--all-profiles`` on query, export, gate and sync, and ``--jq`` on the commands that print JSON
of their own."""

from __future__ import annotations

import click

from secfindings import _cli_fanout
from secfindings._cli_findings import finding_command, findings_command
from secfindings._cli_mcp import mcp_command
from secfindings._cli_profiles import install as install_profile_option
from secfindings._cli_profiles import profile_group
from secfindings._shell_output import add_jq

#: Commands that print JSON of their own (query always; gate and diff with --format json,
#: profile list/show with --json): --jq filters it.
JQ_COMMANDS = ("query", "gate", "diff")


def register(main: click.Group) -> None:
    for command in (profile_group, finding_command, findings_command, mcp_command):
        main.add_command(command)
    for name in _cli_fanout.FAN_OUT:
        if name in main.commands:
            _cli_fanout.install(main.commands[name])
    for name in JQ_COMMANDS:
        if name in main.commands:
            add_jq(main.commands[name])
    for name in ("list", "show"):
        add_jq(profile_group.commands[name])
    install_profile_option(main)

"""Run the emulator as a standalone server: ``secfindings emulator --port 8080`` (or
``python -m secfindings.emulator``).

It prints the base URL, the identity-provider URL and a ready API token, then serves until
interrupted (Ctrl-C).
"""

from __future__ import annotations

import ipaddress
import math
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from secfindings._cli_support import ExitCode, ParamTypeBase
from secfindings.testing import Emulator

if TYPE_CHECKING:
    from secfindings.testing.control import ControlServer

#: The most findings the emulator seeds (they are generated and held in memory).
MAX_FINDINGS = 10_000_000
#: The longest JWT lifetime it issues, in seconds (ten years).
MAX_JWT_LIFETIME = 10 * 365 * 86_400


class _Seconds(ParamTypeBase):
    name = "SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = float(value)
        except ValueError:
            self.fail(f"expected a number of seconds, got {value!r}", param, ctx)
        if not (math.isfinite(seconds) and 0 <= seconds <= MAX_JWT_LIFETIME):
            self.fail(f"must be from 0 to {MAX_JWT_LIFETIME} seconds, got {value}", param, ctx)
        return seconds


class _Host(ParamTypeBase):
    name = "HOST"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            self.fail(f"expected an IP address such as 127.0.0.1, got {value!r}", param, ctx)
        return str(value)


def _int(low: int, high: int) -> click.IntRange:
    return click.IntRange(low, high)


def _help(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--help-emulator: the old spelling of --help (from when the group had its own --help)."""
    if value:
        click.echo(ctx.get_help())
        ctx.exit()


@click.command(
    "emulator",
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Runs the emulator as a standalone server on loopback: prints the base URL, the "
    "identity-provider URL and a ready API token, then serves until interrupted (Ctrl-C).",
    short_help="Run the offline emulator on loopback.",
)
@click.option("--help-emulator", is_flag=True, expose_value=False, is_eager=True, hidden=True, callback=_help)
@click.option("--host", type=_Host(), default="127.0.0.1", help="IP address to bind (default 127.0.0.1)")
@click.option("--port", type=_int(0, 65_535), default=8080, help="port (0 picks a free one; default 8080)")
@click.option(
    "--findings",
    type=_int(0, MAX_FINDINGS),
    default=5_000,
    help=f"findings to seed (default 5000, at most {MAX_FINDINGS})",
)
@click.option("--seed", type=_int(0, 2**64 - 1), default=7, help="seed of the generated data (default 7)")
@click.option(
    "--jwt-lifetime", type=_Seconds(), default=3600.0, help="JWT lifetime in seconds (default 3600)"
)
@click.option("--customer", default="acme", help="customer of the printed API token")
@click.option(
    "--response-cache",
    is_flag=True,
    help="answer repeated queries from memory until the next mutation (for benchmarks)",
)
@click.option(
    "--latency-ms",
    type=_int(0, 600_000),
    default=0,
    help="every API request waits this many milliseconds before it is answered (default 0)",
)
@click.option(
    "--max-aliases",
    type=_int(1, 1_000_000),
    default=None,
    help="refuse documents with more aliased fields than this (default: no limit)",
)
@click.option(
    "--max-document-bytes",
    type=_int(1, 1 << 30),
    default=None,
    help="refuse request bodies larger than this, with 413 (default: no limit)",
)
@click.option(
    "--profile",
    type=click.Choice(["default", "known"]),
    default="default",
    help="the model served: default (ours, richer than the facts) or known (only what the "
    "public facts about the service show: no range filters, no total count, the FindingsView "
    "fields seen in public code)",
)
@click.option(
    "--control",
    is_flag=True,
    help="serve the test hooks (create_finding, inject, stats, ...) on a loopback control "
    "endpoint behind a random key printed at start; see secfindings.testing.control",
)
@click.option(
    "--control-port",
    type=_int(0, 65_535),
    default=0,
    help="port of the control endpoint (default 0: a free one)",
)
def command(
    host: str,
    port: int,
    findings: int,
    seed: int,
    jwt_lifetime: float,
    customer: str,
    response_cache: bool,
    latency_ms: int,
    max_aliases: int | None,
    max_document_bytes: int | None,
    profile: str,
    control: bool,
    control_port: int,
) -> None:
    try:
        emu = Emulator(
            findings=findings,
            seed=seed,
            port=port,
            host=host,
            jwt_lifetime=jwt_lifetime,
            response_cache=response_cache,
            latency_ms=latency_ms,
            max_aliases=max_aliases,
            max_document_bytes=max_document_bytes,
            profile=profile,  # type: ignore[arg-type]  # checked by click.Choice
        )
    except Exception as exc:  # a taken port is the usual cause: say so plainly
        hint = (
            f" (port {port}: give another --port, or --port 0 for a free one)" if "in use" in str(exc) else ""
        )
        click.echo(f"error: {exc}{hint}", err=True)
        sys.exit(ExitCode.FAILED)
    hooks = None
    if control:
        # http.server, about 15 ms of every command's start, only for --control.
        from secfindings.testing.control import ControlServer  # noqa: PLC0415

        try:
            hooks = ControlServer(emu, port=control_port)
        except OSError as exc:
            emu.close()
            click.echo(f"error: the control endpoint cannot listen: {exc}", err=True)
            sys.exit(ExitCode.FAILED)
    _serve(emu, hooks, customer)


def _serve(emu: Emulator, hooks: ControlServer | None, customer: str) -> None:
    """Prints where the emulator is (and its control endpoint), then serves until Ctrl-C."""
    token = emu.create_api_token(customer=customer, name="cli")
    print(f"base_url:  {emu.base_url}")
    print(f"auth_url:  {emu.auth_url}")
    print(f"api_token: {token}")
    print()
    print(f"export SECFINDINGS_BASE_URL={emu.base_url}")
    print(f"export SECFINDINGS_AUTH_URL={emu.auth_url}")
    print(f"export SECFINDINGS_API_TOKEN={token}")
    if hooks is not None:
        print(f"control_url: {hooks.url}")
        print(f"control_key: {hooks.key}")
        print(f"export SECFINDINGS_CONTROL_URL={hooks.url}")
        print(f"export SECFINDINGS_CONTROL_KEY={hooks.key}")
    print("serving; press Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        if hooks is not None:
            hooks.close()
        emu.close()


def main(argv: list[str] | None = None, prog: str = "python -m secfindings.emulator") -> int:
    """Runs the emulator until Ctrl-C; the exit code (bad options: 2, naming the option)."""
    try:
        command.main(argv, prog_name=prog, standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

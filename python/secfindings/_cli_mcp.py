"""``secfindings mcp``: the MCP server (:mod:`secfindings.mcp`) over stdio, or streamable HTTP on
loopback with a bearer key (docs/guides/mcp.md)."""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import socket
from pathlib import Path
from typing import Any

import click

from secfindings._cli_support import errors
from secfindings.profiles import FLAG_PROFILE, PROFILE_ENV

KEY_ENV = "SECFINDINGS_MCP_KEY"


def _rate(text: str | None) -> tuple[int, float] | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*", text)
    if match is None or int(match.group(1)) < 1 or float(match.group(2)) <= 0:
        raise click.BadParameter(f"{text!r}: give REQUESTS/SECONDS, e.g. 100/60", param_hint="--rate-limit")
    return int(match.group(1)), float(match.group(2))


#: The shortest bearer key taken.
MIN_KEY = 16


def _key(key_file: Path | None) -> str:
    """The bearer key: --key-file (made with a fresh key, mode 0600, when it does not exist),
    else $SECFINDINGS_MCP_KEY: the flag before the environment, as everywhere."""
    given = os.environ.get(KEY_ENV, "").strip()
    if given and key_file is None:
        if len(given) < MIN_KEY:
            raise click.UsageError(f"${KEY_ENV}: the key is shorter than {MIN_KEY} characters")
        return given
    if key_file is None:
        raise click.UsageError(f"--http needs a key: set ${KEY_ENV} or give --key-file FILE")
    if not key_file.exists():
        key_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # ~/.config/secfindings, new
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
        click.echo(f"wrote a new key to {key_file}", err=True)
    if os.name == "posix":
        st = key_file.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            # another user who can read it can call every tool as you (loopback is shared)
            raise click.UsageError(
                f"{key_file} is readable by others or not yours: the key is a password (chmod 600 {key_file})"
            )
    key = key_file.read_text(encoding="utf-8").strip()
    if len(key) < MIN_KEY:
        raise click.UsageError(f"{key_file}: the key is shorter than {MIN_KEY} characters")
    return key


@click.command("mcp")
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP on loopback instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="--http: a loopback address.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="--http: 0 picks one."
)
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"--http: the bearer key's file (made when missing); ${KEY_ENV} instead.",
)
@click.option("--allow-writes", is_flag=True, help="List the scoring-rule write tools (absent otherwise).")
@click.option("--profiles", "names", metavar="A,B,...", help="The tenants to serve (default: every profile).")
@click.option(
    "--max-rows", type=click.IntRange(1, 500), default=50, show_default=True, help="Rows a call at most."
)
@click.option(
    "--max-bytes",
    type=click.IntRange(1000, 10_000_000),
    default=64_000,
    show_default=True,
    help="Bytes a call at most.",
)
@click.option(
    "--snapshots",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The folder of saved export files diff_snapshots may read (nothing outside it).",
)
@click.option("--rate-limit", metavar="N/SECONDS", help="Pace each tenant's requests, e.g. 100/60.")
@click.option(
    "--cache-seconds",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Reuse a read tool's answer to the same arguments this long (0: never).",
)
def mcp_command(
    use_http: bool,
    host: str,
    port: int,
    key_file: Path | None,
    allow_writes: bool,
    names: str | None,
    max_rows: int,
    max_bytes: int,
    snapshots: Path | None,
    rate_limit: str | None,
    cache_seconds: float,
) -> None:
    """Serve the findings to an AI assistant over MCP (read-only unless --allow-writes).

    stdio by default (the assistant starts this command); --http serves streamable HTTP at
    http://127.0.0.1:PORT/mcp behind a bearer key. Several profiles: every call names its tenant.
    """
    rate = _rate(rate_limit)
    try:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError
    except ValueError:
        raise click.BadParameter(
            f"{host!r} is not a loopback address (127.0.0.1, ::1)", param_hint="--host"
        ) from None
    with errors():
        try:
            import uvicorn  # noqa: PLC0415 - optional: the mcp extra

            from secfindings import mcp as server_module  # noqa: PLC0415 - optional: the mcp extra
        except ImportError:
            raise click.UsageError(
                "secfindings mcp needs the mcp package: pip install 'secfindings[mcp]'"
            ) from None
        selected = [n.strip() for n in names.split(",") if n.strip()] if names else None
        one = FLAG_PROFILE.get() or os.environ.get(PROFILE_ENV, "").strip()  # as every command
        if selected is None and one:
            selected = [str(one)]
        tenants = server_module.Tenants.configure(selected, rate)
        ctx = server_module.context(
            tenants, max_rows=max_rows, max_bytes=max_bytes, snapshots=snapshots, cache_seconds=cache_seconds
        )
        server = server_module.build_server(ctx, allow_writes=allow_writes)
        try:
            if not use_http:
                server.run("stdio")
                return
            key = _key(key_file)
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)  # connections wait in the backlog until the server takes them
            bound = sock.getsockname()[1]
            app = server_module.http_app(server, key, host, bound)
            config: Any = uvicorn.Config(app, log_level="warning", lifespan="on")
            click.echo(
                f"serving MCP on http://{host if family == socket.AF_INET else f'[{host}]'}:{bound}/mcp",
                err=True,
            )
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            tenants.close()

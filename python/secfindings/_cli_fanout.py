"""``--profiles a,b,c`` / ``--all-profiles`` on query, export, gate and sync: the command once
per tenant, each in a process of its own (its own client, JWT and request budget, and a timeout
that can end it), at most ``--max-parallel`` at once.

Results carry the tenant: JSON on stdout becomes ``{"tenant": ..., "status": ..., "data": ...}``
per tenant (a JSON-lines output gets ``"tenant"`` in each object), other lines get ``[tenant] ``
in front; stderr's lines too. A summary on stderr names each tenant's outcome: succeeded,
failed (with its exit code), timed out, or exceeded (gate). Exit code: 0 all succeeded, 4 none
failed but a gate limit was exceeded, 2 all failed on usage, else 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from secfindings._cli_support import ExitCode, errors
from secfindings.profiles import ProfilesFile, check_name, load

#: Commands that fan out, and the parameter that names a per-tenant output (export --out, sync DEST).
FAN_OUT = {"query": None, "export": "out", "gate": "out", "sync": "dest"}
#: Options of the parent only (--jq runs in the parent, on the records that carry the tenant).
_OWN = {
    "--profiles": True,
    "--all-profiles": False,
    "--tenant-timeout": True,
    "--max-parallel": True,
    "--jq": True,
}


@dataclass
class TenantResult:
    tenant: str
    status: str  # succeeded, failed, timed out, exceeded
    exit_code: int | None
    seconds: float
    stdout: str
    stderr: str


def _keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    ctx.meta[f"secfindings.fanout.{param.name}"] = value


def options() -> list[click.Option]:
    return [
        click.Option(
            ["--profiles", "profiles"],
            metavar="A,B,...",
            expose_value=False,
            callback=_keep,
            help="Run once per profile (tenant), in parallel; results carry the tenant.",
        ),
        click.Option(
            ["--all-profiles", "all_profiles"],
            is_flag=True,
            expose_value=False,
            callback=_keep,
            help="Run once per profile of the profiles file.",
        ),
        click.Option(
            ["--tenant-timeout", "tenant_timeout"],
            type=click.FloatRange(min=0, min_open=True),
            default=600.0,
            show_default=True,
            expose_value=False,
            callback=_keep,
            help="With --profiles: seconds one tenant may take; then it is stopped and reported.",
        ),
        click.Option(
            ["--max-parallel", "max_parallel"],
            type=click.IntRange(1, 32),
            default=4,
            show_default=True,
            expose_value=False,
            callback=_keep,
            help="With --profiles: tenants run at once.",
        ),
    ]


def install(command: click.Command) -> None:
    """The fan-out options on ``command``; its callback runs per tenant when they are given."""
    command.params.extend(options())
    parse = command.parse_args

    def parse_args(ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["secfindings.fanout.argv"] = list(args)
        return parse(ctx, args)

    setattr(command, "parse_args", parse_args)  # noqa: B010 - the instance's own
    inner = command.callback
    if inner is None:  # pragma: no cover
        return

    def callback(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        with errors():  # a bad profiles file or name: exit 2, one line
            tenants = _tenants(ctx)
        if tenants is None:
            _ready()
            return inner(*args, **kwargs)
        sys.exit(_run(ctx, command, tenants))

    command.callback = callback


def _tenants(ctx: click.Context) -> list[str] | None:
    names = ctx.meta.get("secfindings.fanout.profiles")
    every = ctx.meta.get("secfindings.fanout.all_profiles")
    if names is None and not every:
        return None
    if names is not None and every:
        raise click.UsageError("--profiles and --all-profiles contradict each other: give one of them")
    doc = load()
    if every:
        tenants = sorted(doc.profiles)
        if not tenants:
            raise click.UsageError(f"--all-profiles: {doc.path} has no profiles")
        return _own(doc, tenants)
    tenants = []
    for name in str(names).split(","):
        name = name.strip()
        if name and name not in tenants:
            doc.get(check_name(name))  # unknown: a usage error before anything runs
            tenants.append(name)
    if not tenants:
        raise click.BadParameter("name one profile at least", param_hint="--profiles")
    return _own(doc, tenants)


def _own(doc: ProfilesFile, tenants: list[str]) -> list[str]:
    """``tenants``, each with an API URL and a token source of its own: a profile without one
    took the environment's (``$SECFINDINGS_API_TOKEN`` went to every tenant's identity
    provider, a token of one tenant to the others' hosts)."""
    for name in tenants:
        p = doc.profiles[name]
        missing = [
            w for w, ok in (("base_url", p.base_url), ("token source", p.has_token_source())) if not ok
        ]
        if missing:
            raise click.UsageError(
                f"profile {name!r} has no {' and no '.join(missing)} of its own: with several tenants "
                "each needs both (the environment's would go to every tenant)"
            )
    return tenants


def _run(ctx: click.Context, command: click.Command, tenants: list[str]) -> int:
    argv = _strip(ctx.meta.get("secfindings.fanout.argv", []))
    target = FAN_OUT.get(command.name or "")
    if target is not None and ctx.params.get(target) is not None:
        where = str(ctx.params[target])
        if where == "-" and command.name == "export":
            fmt = ctx.params.get("fmt") or "jsonl"
            if fmt not in ("jsonl", "ocsf"):
                raise click.UsageError(
                    "--out - with several tenants: JSON lines only (rows carry the tenant)"
                )
            target = None
        elif where == "-":
            target = None
        elif "{tenant}" not in where and "://" in where:
            raise click.UsageError(f"with several tenants, put {{tenant}} in {where!r} (one per tenant)")
    stdin = None
    if (
        command.name == "query"
        and ctx.params.get("file") is not None
        and ctx.params["file"].name == "<stdin>"
    ):
        stdin = sys.stdin.read()
    timeout = float(ctx.meta.get("secfindings.fanout.tenant_timeout") or 600.0)
    parallel = int(ctx.meta.get("secfindings.fanout.max_parallel") or 4)

    def one(tenant: str) -> TenantResult:
        args = list(argv)
        if target is not None:
            args = _replace(command, args, target, _per_tenant(str(ctx.params[target]), tenant))
        child = [sys.executable, "-m", "secfindings", command.name or "", *args, "-p", tenant]
        return run_tenant(tenant, child, timeout, stdin)

    with ThreadPoolExecutor(max_workers=min(parallel, len(tenants))) as pool:
        results = list(pool.map(one, tenants))
    for result in results:
        _print(result)
    return summarize(results)


#: A tenant's process says it is ready (started, its arguments read) on this file descriptor;
#: its --tenant-timeout counts from then, so a loaded machine's slow interpreter start is not
#: taken for a hanging tenant. Starting has a limit of its own.
READY_FD_ENV = "SECFINDINGS_FANOUT_READY_FD"
START_LIMIT = 120.0


def _ready() -> None:
    """In a tenant's process: tell the parent the work starts now."""
    fd = os.environ.pop(READY_FD_ENV, None)
    if fd is None:
        return
    with contextlib.suppress(OSError, ValueError):
        os.write(int(fd), b"r")
        os.close(int(fd))


def run_tenant(tenant: str, argv: Sequence[str], timeout: float, stdin: str | None = None) -> TenantResult:
    """Runs one tenant's process: ``timeout`` seconds from when it is ready (at most
    :data:`START_LIMIT` to get there), then it is killed and reported as timed out."""
    env = {k: v for k, v in os.environ.items() if k not in ("SECFINDINGS_PROFILE", READY_FD_ENV)}
    posix = os.name == "posix"
    read_end = write_end = -1
    if posix:
        read_end, write_end = os.pipe()
        env[READY_FD_ENV] = str(write_end)
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        pass_fds=(write_end,) if posix else (),
    )
    waiter = threading.Thread(target=os.read, args=(read_end, 1), daemon=True)
    if posix:
        os.close(write_end)
        waiter.start()
        waiter.join(START_LIMIT)  # ready, or the process ended (the read sees its end)
        started = time.monotonic()
    try:
        out, err = proc.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return TenantResult(tenant, "timed out", None, time.monotonic() - started, out or "", err or "")
    finally:
        if posix:  # the process has ended, so the read has returned
            waiter.join()
            os.close(read_end)
    code = proc.returncode
    status = "succeeded" if code == 0 else "exceeded" if code == ExitCode.LIMIT_EXCEEDED else "failed"
    return TenantResult(tenant, status, code, time.monotonic() - started, out, err)


def _print(result: TenantResult) -> None:
    """The tenant's output, carrying its name."""
    out = result.stdout
    if out.strip():
        try:
            value = json.loads(out)
        except ValueError:
            value = _NO_JSON
        if value is not _NO_JSON:
            click.echo(
                json.dumps(
                    {"tenant": result.tenant, "status": result.status, "data": value}, ensure_ascii=False
                )
            )
        else:
            for line in out.splitlines():
                click.echo(_tagged(result.tenant, line))
    elif result.status != "succeeded":
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        error = lines[-1] if lines else None
        record = {
            "tenant": result.tenant,
            "status": result.status,
            "exit_code": result.exit_code,
            "error": error,
        }
        click.echo(json.dumps(record, ensure_ascii=False))
    for line in result.stderr.splitlines():
        click.echo(f"[{result.tenant}] {line}", err=True)


_NO_JSON = object()


def _tagged(tenant: str, line: str) -> str:
    if line.startswith("{"):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            return json.dumps({"tenant": tenant, **row}, ensure_ascii=False)
    return f"[{tenant}] {line}"


def summarize(results: Sequence[TenantResult]) -> int:
    """The summary line per tenant on stderr, and the exit code of the whole run."""
    for r in results:
        how = {
            "succeeded": "succeeded",
            "exceeded": "a limit was exceeded (exit 4)",
            "failed": f"failed (exit {r.exit_code})",
            "timed out": f"timed out after {r.seconds:.1f} s",
        }[r.status]
        click.echo(f"tenant {r.tenant}: {how}", err=True)
    counts = {
        s: sum(r.status == s for r in results) for s in ("succeeded", "exceeded", "failed", "timed out")
    }
    click.echo(
        f"{len(results)} tenants: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n),
        err=True,
    )
    if all(r.status == "succeeded" for r in results):
        return ExitCode.OK
    if not counts["failed"] and not counts["timed out"]:
        return ExitCode.LIMIT_EXCEEDED
    if all(r.exit_code == ExitCode.USAGE for r in results):
        return ExitCode.USAGE
    return ExitCode.FAILED


def _per_tenant(where: str, tenant: str) -> str:
    """``where`` for one tenant: ``{tenant}`` replaced, else ``.TENANT`` before the suffix."""
    if "{tenant}" in where:
        return where.replace("{tenant}", tenant)
    path = Path(where)
    return str(path.with_name(f"{path.stem}.{tenant}{path.suffix}"))


def _strip(args: Sequence[str]) -> list[str]:
    """The command's arguments less the fan-out options and -p/--profile."""
    out: list[str] = []
    skip = False
    own = {**_OWN, "-p": True, "--profile": True}
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            out.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if name in own:
            skip = own[name] and "=" not in arg
            continue
        if arg.startswith("-p") and not arg.startswith("--") and len(arg) > 2:
            continue  # -pNAME
        out.append(arg)
    return out


def _replace(command: click.Command, args: list[str], param_name: str, value: str) -> list[str]:
    """``args`` with the value of the parameter ``param_name`` (an option or an argument)
    replaced by ``value``."""
    param: click.Parameter = next(p for p in command.params if p.name == param_name)
    takes_value = {
        opt
        for p in command.params
        if isinstance(p, click.Option) and not p.is_flag and not p.count
        for opt in p.opts
    }
    out = list(args)
    if isinstance(param, click.Option):
        for i, arg in enumerate(out):
            name, eq, _ = arg.partition("=")
            if name in param.opts:
                if eq:
                    out[i] = f"{name}={value}"
                else:
                    out[i + 1] = value
                return out
        return out
    index = [p.name for p in command.params if isinstance(p, click.Argument)].index(param.name)
    position = 0
    i = 0
    while i < len(out):
        arg = out[i]
        if arg == "--":
            i += 1
            continue
        if arg.startswith("-") and arg != "-":
            i += 2 if arg in takes_value else 1
            continue
        if position == index:
            out[i] = value
            return out
        position += 1
        i += 1
    return out

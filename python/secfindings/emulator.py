"""Run the emulator as a standalone server: ``python -m secfindings.emulator --port 8080``.

It prints the base URL, the identity-provider URL and a ready API token, then serves until
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import sys
import threading
from collections.abc import Callable

#: The most findings the emulator seeds (they are generated and held in memory).
MAX_FINDINGS = 10_000_000
#: The longest JWT lifetime it issues, in seconds (ten years).
MAX_JWT_LIFETIME = 10 * 365 * 86_400


def _int_in(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_JWT_LIFETIME):
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_JWT_LIFETIME} seconds, got {text}")
    return value


def _host(text: str) -> str:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IP address such as 127.0.0.1, got {text!r}") from None
    return text


def main(argv: list[str] | None = None, prog: str = "python -m secfindings.emulator") -> int:
    """Runs the emulator until Ctrl-C. Bad options exit 2 (argparse), naming the option."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Runs the emulator as a standalone server on loopback: prints the base URL, the "
        "identity-provider URL and a ready API token, then serves until interrupted (Ctrl-C).",
    )
    parser.add_argument(
        "--host", type=_host, default="127.0.0.1", help="IP address to bind (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=_int_in(0, 65_535), default=8080, help="port (0 picks a free one; default 8080)"
    )
    parser.add_argument(
        "--findings",
        type=_int_in(0, MAX_FINDINGS),
        default=5_000,
        help=f"findings to seed (default 5000, at most {MAX_FINDINGS})",
    )
    parser.add_argument(
        "--seed", type=_int_in(0, 2**64 - 1), default=7, help="seed of the generated data (default 7)"
    )
    parser.add_argument(
        "--jwt-lifetime", type=_seconds, default=3600.0, help="JWT lifetime in seconds (default 3600)"
    )
    parser.add_argument("--customer", default="acme", help="customer of the printed API token")
    parser.add_argument(
        "--response-cache",
        action="store_true",
        help="answer repeated queries from memory until the next mutation (for benchmarks)",
    )
    parser.add_argument(
        "--latency-ms",
        type=_int_in(0, 600_000),
        default=0,
        help="every API request waits this many milliseconds before it is answered (default 0)",
    )
    parser.add_argument(
        "--max-aliases",
        type=_int_in(1, 1_000_000),
        default=None,
        help="refuse documents with more aliased fields than this (default: no limit)",
    )
    parser.add_argument(
        "--max-document-bytes",
        type=_int_in(1, 1 << 30),
        default=None,
        help="refuse request bodies larger than this, with 413 (default: no limit)",
    )
    parser.add_argument(
        "--profile",
        choices=("default", "known"),
        default="default",
        help="the model served: default (ours, richer than the facts) or known (only what the "
        "public facts about the service show: no range filters, no total count, the FindingsView "
        "fields seen in public code)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="serve the test hooks (create_finding, inject, stats, ...) on a loopback control "
        "endpoint behind a random key printed at start; see secfindings.testing.control",
    )
    parser.add_argument(
        "--control-port",
        type=_int_in(0, 65_535),
        default=0,
        help="port of the control endpoint (default 0: a free one)",
    )
    args = parser.parse_args(argv)

    from secfindings.testing import Emulator

    try:
        emu = Emulator(
            findings=args.findings,
            seed=args.seed,
            port=args.port,
            host=args.host,
            jwt_lifetime=args.jwt_lifetime,
            response_cache=args.response_cache,
            latency_ms=args.latency_ms,
            max_aliases=args.max_aliases,
            max_document_bytes=args.max_document_bytes,
            profile=args.profile,
        )
    except Exception as exc:  # a taken port is the usual cause: say so plainly
        print(f"error: {exc}", file=sys.stderr)
        return 1
    control = None
    if args.control:
        from secfindings.testing.control import ControlServer

        try:
            control = ControlServer(emu, port=args.control_port)
        except OSError as exc:
            emu.close()
            print(f"error: the control endpoint cannot listen: {exc}", file=sys.stderr)
            return 1
    token = emu.create_api_token(customer=args.customer, name="cli")
    print(f"base_url:  {emu.base_url}")
    print(f"auth_url:  {emu.auth_url}")
    print(f"api_token: {token}")
    print()
    print(f"export SECFINDINGS_BASE_URL={emu.base_url}")
    print(f"export SECFINDINGS_AUTH_URL={emu.auth_url}")
    print(f"export SECFINDINGS_API_TOKEN={token}")
    if control is not None:
        print(f"control_url: {control.url}")
        print(f"control_key: {control.key}")
        print(f"export SECFINDINGS_CONTROL_URL={control.url}")
        print(f"export SECFINDINGS_CONTROL_KEY={control.key}")
    print("serving; press Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        if control is not None:
            control.close()
        emu.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

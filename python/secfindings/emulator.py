"""Run the emulator as a standalone server: ``python -m secfindings.emulator --port 8080``.

It prints the base URL, the identity-provider URL and a ready API token, then serves until
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m secfindings.emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (0 picks a free one; default 8080)")
    parser.add_argument("--findings", type=int, default=5_000, help="findings to seed (default 5000)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated data (default 7)")
    parser.add_argument("--jwt-lifetime", type=float, default=3600.0, help="JWT lifetime in seconds")
    parser.add_argument("--customer", default="acme", help="customer of the printed API token")
    parser.add_argument(
        "--response-cache",
        action="store_true",
        help="answer repeated queries from memory until the next mutation (for benchmarks)",
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
        )
    except Exception as exc:  # a taken port is the usual cause: say so plainly
        print(f"error: {exc}", file=sys.stderr)
        return 1
    token = emu.create_api_token(customer=args.customer, name="cli")
    print(f"base_url:  {emu.base_url}")
    print(f"auth_url:  {emu.auth_url}")
    print(f"api_token: {token}")
    print()
    print(f"export SECFINDINGS_BASE_URL={emu.base_url}")
    print(f"export SECFINDINGS_AUTH_URL={emu.auth_url}")
    print(f"export SECFINDINGS_API_TOKEN={token}")
    print("serving; press Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        emu.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

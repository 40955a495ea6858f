"""Alert on new critical findings: pushed by the server (subscribe) or polled (watch).

    python examples/alerts.py [--mode subscribe|watch|both] [--count N]

Against the embedded emulator (the default) the script also plays the scanner: it creates a few
findings of mixed severities while it listens, and prints an alert for each critical one. With
SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL set it listens to that server until it has seen
``--count`` alerts (Ctrl-C stops it); ``watch`` works against any server, ``subscribe`` needs one
that serves the (emulator-modelled) ``finding_created`` subscription.

An alert goes to stdout here; replace ``alert()`` with a chat webhook, a ticket or a SIEM event.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable
from typing import Any

import secfindings
from secfindings import field

CRITICAL = 5


def alert(source: str, finding_id: Any, title: Any, score: Any) -> None:
    print(f"[{source}] critical finding #{finding_id}: {title} (score {score})", flush=True)


def by_subscription(client: secfindings.Client, count: int, scanner: Callable[[object], None]) -> str | None:
    """Pushed: one WebSocket, events as they happen. Returns where to resume (the cursor)."""
    with client.subscribe("finding_created", {"severities": [CRITICAL]}) as events:
        scanner(events)
        seen = 0
        for event in events:  # a FindingEvent; blocks until the next one; break out any time
            f = event.finding
            if f is None:  # the schema allows an event without its finding
                continue
            alert("subscribe", f.id_int, f.title, f.finding_score.score)
            seen += 1
            if seen == count:
                break
        return events.cursor  # keep it: {"after": cursor} resumes from there


def by_polling(
    client: secfindings.Client,
    count: int,
    interval: float,
    scanner: Callable[[secfindings.Watch[secfindings.FindingsView]], None],
) -> Any:
    """Polled: any server. Returns the watermark to keep."""
    critical = field("severity").in_([str(CRITICAL)])
    watch = client.findings_view(filters=critical, fields="id id_int title score").watch(
        interval=interval, by="id"
    )
    scanner(watch)
    for seen, f in enumerate(watch, 1):  # starts after the newest finding; then polls
        alert("watch", f.id_int, f.title, f.score)
        if seen == count:
            break
    return watch.watermark


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mode", choices=["subscribe", "watch", "both"], default="both")
    ap.add_argument("--count", type=int, default=3, help="alerts to wait for (default 3)")
    args = ap.parse_args()
    if os.environ.get("SECFINDINGS_API_TOKEN") and os.environ.get("SECFINDINGS_BASE_URL"):
        client = secfindings.Client()
        print(f"listening to {client.base_url}")
        if args.mode in ("subscribe", "both"):
            print("resume after:", by_subscription(client, args.count, lambda _events: None))
        if args.mode in ("watch", "both"):
            print("watermark:", by_polling(client, args.count, 60.0, lambda _: None))
        return 0

    from secfindings.testing import Emulator

    with Emulator(findings=2_000, seed=7) as emu, emu.client() as client:
        print("embedded emulator: playing the scanner too")

        def scan(ready: Any) -> None:
            """Creates findings of mixed severities once the listener is ready for them."""

            def run() -> None:
                while not ready():
                    threading.Event().wait(0.01)
                for s in [5, 3, 5, 1, 4, 5, 2, 5]:  # four critical findings among them
                    emu.create_finding(s)

            threading.Thread(target=run, daemon=True).start()

        if args.mode in ("subscribe", "both"):
            # Ready once the server holds the subscription.
            ready = lambda: emu.subscription_stats()["active"] >= 1  # noqa: E731
            cursor = by_subscription(client, args.count, lambda _events: scan(ready))
            print("subscribe: resume after cursor", cursor)
        if args.mode in ("watch", "both"):
            # Ready once the watch has found where to start (after the newest finding).
            mark = by_polling(client, args.count, 0.05, lambda watch: scan(lambda: watch.polls >= 1))
            print("watch: watermark", mark)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

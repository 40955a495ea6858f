"""``secfindings examples [NAME]``: the examples the package carries (a copy of the source tree's
``examples/``, kept equal by a test), listed, or one printed to stdout, so that an installed
package has them: ``secfindings examples quickstart > quickstart.py``."""

from __future__ import annotations

import json
from importlib import resources

import click

from secfindings._cli_support import emit, errors
from secfindings._shared import did_you_mean
from secfindings.errors import ValidationError

__all__ = ["examples", "examples_command", "source"]

#: The suffix the packaged copies carry (so that no linter or type checker takes them for the
#: package's own modules).
_SUFFIX = ".txt"


def examples() -> dict[str, str]:
    """The examples by file name (``quickstart.py``, ``triage.ipynb``), with their first line."""
    folder = resources.files("secfindings") / "examples"
    out: dict[str, str] = {}
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        if item.name.endswith(_SUFFIX):
            name = item.name[: -len(_SUFFIX)]
            out[name] = _summary(name, item.read_text(encoding="utf-8"))
    return out


def source(name: str) -> str:
    """The text of the example ``name`` (``quickstart``, ``quickstart.py`` or ``triage.ipynb``)."""
    known = examples()
    match = name if name in known else next((k for k in known if k.rsplit(".", 1)[0] == name), None)
    if match is None:
        stems = [k.rsplit(".", 1)[0] for k in known]
        raise ValidationError(f"no example {name!r}{did_you_mean(name, stems)}; known: {', '.join(stems)}")
    item = resources.files("secfindings") / "examples" / (match + _SUFFIX)
    return item.read_text(encoding="utf-8")


def _summary(name: str, text: str) -> str:
    if name.endswith(".ipynb"):
        try:
            cells = json.loads(text)["cells"]
            first = "".join(cells[0]["source"]).splitlines()[0]
        except (ValueError, KeyError, IndexError, TypeError):
            return ""
        return first.lstrip("# ").strip()
    body = text.lstrip()
    if body.startswith('"""'):
        return body[3:].split("\n", 1)[0].strip().rstrip('"')
    return ""


@click.command("examples")
@click.argument("name", required=False)
def examples_command(name: str | None) -> None:
    """List the examples the package carries, or print example NAME to stdout
    (secfindings examples quickstart > quickstart.py). They run against the embedded emulator
    unless SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set."""
    with errors():
        if name is None:
            known = examples()
            width = max(len(k) for k in known)
            emit("\n".join(f"{k.ljust(width)}  {summary}".rstrip() for k, summary in known.items()))
        else:
            emit(source(name), nl=False)

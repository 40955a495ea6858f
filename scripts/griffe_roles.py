"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the package's docstrings use
Sphinx roles (:class:`~secfindings.Client`, :meth:`close`), which Markdown would show as they
are written. This turns each into inline code (``Client``, ``close``), the name a reader looks
for; the API pages link the names through their own headings."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj|py:\w+):`(~?)([^`]+)`")


def _plain(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring as inline code."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_plain, obj.docstring.value)

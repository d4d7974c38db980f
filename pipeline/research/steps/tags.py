"""Escaping for the tagged user messages of every step (<question>, <finding id="...">, ...): data cannot forge a
tag."""
from __future__ import annotations

import html


def text(value: str) -> str:
    """Element text: <, > and & escaped."""
    return html.escape(value, quote=False)


def attr(value: str) -> str:
    """An attribute value: quotes escaped too."""
    return html.escape(value, quote=True)


def attrs(values: dict[str, str]) -> str:
    """`key="value"` pairs, each value escaped."""
    return " ".join(f'{k}="{attr(v)}"' for k, v in values.items())

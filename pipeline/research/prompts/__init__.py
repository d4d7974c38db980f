"""Prompt texts, versioned package data: `load(name)` returns the text of prompts/<name>.md."""
from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    """The prompt text, byte-identical every call (so the cached prefix stays cached)."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip() + "\n"


@cache
def version() -> str:
    """A short hash of every prompt file: runs record it so a prompt change is visible in comparisons."""
    h = hashlib.sha256()
    for f in sorted(resources.files(__package__).iterdir(), key=lambda p: p.name):
        if f.name.endswith(".md"):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]

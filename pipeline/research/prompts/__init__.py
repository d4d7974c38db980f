"""Prompt texts, versioned package data: `load(name)` returns the text of prompts/<name>.md."""
from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    """The prompt text, byte-identical every call (so the cached prefix stays cached)."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip() + "\n"


# The model adapters keep their own prompts (pipeline/models/prompts/); they count in the version too.
_FOLDERS = (__package__, "pipeline.models.prompts")


@cache
def version() -> str:
    """A short hash of every prompt file: runs record it so a prompt change is visible in comparisons."""
    h = hashlib.sha256()
    files = [f for package in _FOLDERS for f in resources.files(package).iterdir() if f.name.endswith(".md")]
    for f in sorted(files, key=lambda p: p.name):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]

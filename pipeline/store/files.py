"""Saved runs as files: `<run_id>.json` (the RunResult) and `<run_id>.timeline.json` beside it, written atomically."""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from pipeline.core.schema import RunResult

if TYPE_CHECKING:
    from pipeline.store.timeline import TimelineEntry

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
TIMELINE_SUFFIX = ".timeline.json"


def read_run_file(path: Path) -> RunResult:
    """The RunResult in `path`; raises OSError, ValueError or ValidationError when it is not one."""
    return RunResult.model_validate_json(Path(path).read_bytes())


def load_run_file(folder: Path, run_id: str) -> RunResult | None:
    """`folder/<run_id>.json` when `run_id` is a plain id (no path tricks) and the file is a valid RunResult."""
    if not RUN_ID.match(run_id):
        return None
    path = Path(folder) / f"{run_id}.json"
    try:
        return read_run_file(path) if path.is_file() else None
    except (ValidationError, OSError, ValueError):
        return None


def save_run_file(folder: Path, result: RunResult, timeline: list[TimelineEntry] | None = None) -> Path:
    """Writes `folder/<run_id>.json` (and its timeline) atomically; returns the RunResult file's path."""
    if not RUN_ID.match(result.run_id):
        raise ValueError(f"run id {result.run_id!r} is not a plain id")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.run_id}.json"
    _write_atomic(path, result.model_dump_json(indent=1))
    if timeline is not None:
        _write_atomic(folder / f"{result.run_id}{TIMELINE_SUFFIX}",
                      json.dumps([e.model_dump() for e in timeline], ensure_ascii=False))
    return path


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)

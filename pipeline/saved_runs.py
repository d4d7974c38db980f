"""Saved runs for the app: RunResult JSON files summarised into table rows (cached per file, refreshed when a file
changes), loaded by run id, and the per-call timeline of a run. Bad files are reported, never fatal."""
from __future__ import annotations

import json
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, Field, ValidationError

from .schema import RunResult

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
TIMELINE_SUFFIX = ".timeline.json"
_BAD_ID = "its run id {!r} is not a plain id (letters, digits, '_', '.', '-'), so no link could open it"


class RunSummary(BaseModel):
    """One row of the benchmark table."""

    run_id: str
    question: str
    suite: str = "default"
    mode: str
    models: str = ""
    date: str = ""
    status: str
    findings: int
    rejected: int
    answered: int = 0
    planned: int = 0
    problems: int
    cost_usd: float
    seconds: float = 0.0
    file: str


def summarise(rr: RunResult, *, file: str, suite: str, mtime: float | None = None) -> RunSummary:
    """The table row of one run; coverage counts planned sub-questions with at least one passed-on finding."""
    plan = rr.plan
    answered_ids = {f.sub_question for f in rr.findings if f.support != "unsupported"}
    answered = sum(1 for sq in plan.sub_questions if sq.id in answered_ids) if plan else 0
    planned = (len(plan.sub_questions) + len(plan.not_researched)) if plan else 0
    models = " / ".join(v for k, v in rr.models.items() if k in ("lead", "worker"))
    return RunSummary(
        run_id=rr.run_id, question=rr.question, suite=str(getattr(rr, "suite", None) or suite), mode=rr.mode,
        models=models, date=_run_date(rr, mtime), status=rr.status, findings=len(rr.findings),
        rejected=len(rr.rejected), answered=answered, planned=planned, problems=len(rr.problems),
        cost_usd=round(rr.usage.cost_usd, 6),
        seconds=round(rr.timings.get("total") or sum(step_times(rr).values()), 3), file=file,
    )


def step_times(rr: RunResult) -> dict[str, float]:
    """Seconds per step; `started_at` (a timestamp) and `total` are not steps."""
    return {k: v for k, v in rr.timings.items() if k not in ("started_at", "total")}


def _run_date(rr: RunResult, mtime: float | None) -> str:
    """When the run happened: its start time, else its last fetch (older files), else the file's time."""
    if started := rr.timings.get("started_at"):
        return datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    fetched = [s.fetched_at for s in rr.sources if s.fetched_at]
    if fetched:
        return max(fetched)[:19].replace("T", " ")
    if mtime is not None:
        return datetime.fromtimestamp(mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return ""


def _read(path: Path) -> RunResult:
    return RunResult.model_validate_json(path.read_bytes())


def _reason(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


class RunLibrary:
    """The RunResult files under one folder (a sub-folder names the suite); only changed files are parsed again."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[tuple[int, int], RunSummary | str]] = {}
        self._by_id: dict[str, Path] = {}

    def refresh(self) -> tuple[list[RunSummary], list[tuple[str, str]]]:
        """Rows (newest first) and (file, reason) for each file that is not a RunResult; cheap when nothing changed."""
        with self._lock:
            found: dict[Path, tuple[int, int]] = {}
            for path in self._files():
                try:
                    st = path.stat()
                except OSError:
                    continue
                found[path] = (st.st_mtime_ns, st.st_size)
            for gone in set(self._seen) - set(found):
                del self._seen[gone]
            for path, sig in found.items():
                if path in self._seen and self._seen[path][0] == sig:
                    continue
                rel = path.relative_to(self.folder)
                suite = rel.parts[0] if len(rel.parts) > 1 else "default"
                try:
                    rr = _read(path)
                    entry: RunSummary | str = summarise(rr, file=str(rel), suite=suite, mtime=sig[0] / 1e9) \
                        if RUN_ID.match(rr.run_id) else _BAD_ID.format(rr.run_id[:80])
                except (ValidationError, OSError, ValueError) as e:
                    entry = _reason(e)
                self._seen[path] = (sig, entry)
            rows = [e for _, e in self._seen.values() if isinstance(e, RunSummary)]
            errors = sorted((str(p.relative_to(self.folder)), e) for p, (_, e) in self._seen.items()
                            if isinstance(e, str))
            self._by_id = {}
            for path, (_, e) in sorted(self._seen.items()):
                if isinstance(e, RunSummary):
                    self._by_id.setdefault(e.run_id, path)
        rows.sort(key=lambda r: (r.date, r.run_id), reverse=True)
        return rows, errors

    def _files(self) -> Iterable[Path]:
        if not self.folder.is_dir():
            return []
        return (p for p in self.folder.rglob("*.json") if not p.name.endswith(TIMELINE_SUFFIX) and p.is_file())

    def path_of(self, run_id: str) -> Path | None:
        """The file holding `run_id`, as of the last refresh."""
        with self._lock:
            return self._by_id.get(run_id)

    def load(self, run_id: str) -> RunResult | None:
        """The full RunResult of `run_id`, or None when no valid file holds it."""
        path = self.path_of(run_id)
        if path is None:
            self.refresh()
            path = self.path_of(run_id)
        try:
            return _read(path) if path else None
        except (ValidationError, OSError, ValueError):
            return None


def load_saved_runs(folder: Path) -> tuple[list[RunSummary], list[tuple[str, str]]]:
    """Summaries of every valid RunResult file in `folder` (and its sub-folders), and (file, reason) for the rest."""
    return RunLibrary(folder).refresh()


def load_run_file(folder: Path, run_id: str) -> RunResult | None:
    """`folder/<run_id>.json` when `run_id` is a plain id (no path tricks) and the file is a valid RunResult."""
    if not RUN_ID.match(run_id):
        return None
    path = Path(folder) / f"{run_id}.json"
    try:
        return _read(path) if path.is_file() else None
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


# -- timeline -------------------------------------------------------------------------------------------------------

class TimelineEntry(BaseModel):
    """One search, fetch or model call of a run (no request or page bodies), in the order it happened."""

    step: str = ""
    kind: str
    label: str = ""
    ok: bool = True
    tokens: int = 0
    cost_usd: float = 0.0
    ms: float = 0.0


class Timeline(BaseModel):
    """A run's calls and where they came from: "events" (recorded live) or "timings" (step times only)."""

    origin: str
    entries: list[TimelineEntry] = Field(default_factory=list)


class TimelineRecorder:
    """An event sink that keeps a compact timeline entry per search, fetch and model call; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[TimelineEntry] = []
        self._step = ""

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None:
        entry = self._entry(kind, payload, tokens, ms)
        with self._lock:
            if kind == "step" and payload.get("status") == "started":
                self._step = str(payload.get("name") or "")
            if entry is not None:
                entry.step = entry.step or self._step
                self._entries.append(entry)

    @staticmethod
    def _entry(kind: str, p: dict[str, Any], tokens: int, ms: float) -> TimelineEntry | None:
        if kind == "search":
            return TimelineEntry(kind="search", label=str(p.get("query", ""))[:200], ok=not p.get("message")
                                 or bool(p.get("count")), ms=ms)
        if kind == "fetch":
            return TimelineEntry(kind="fetch", label=str(p.get("final_url") or p.get("url", ""))[:300],
                                 ok=bool(p.get("ok")), ms=ms)
        if kind == "model_response":
            return TimelineEntry(kind="model", label=str(p.get("purpose", "")), tokens=tokens,
                                 cost_usd=float(p.get("cost_usd") or 0.0), ms=ms)
        if kind == "model_error":
            return TimelineEntry(kind="model", label=f"{p.get('purpose', '')} ({p.get('kind', 'error')})", ok=False)
        return None

    def entries(self) -> list[TimelineEntry]:
        with self._lock:
            return [e.model_copy() for e in self._entries]


TIMELINE_KINDS = ("step", "search", "fetch", "model_response", "model_error")


def timeline_of_events(events: Iterable[tuple[str, dict[str, Any], int, float]]) -> list[TimelineEntry]:
    """Timeline entries from (kind, payload, tokens, ms) events in the order they happened (e.g. the run store's)."""
    recorder = TimelineRecorder()
    for kind, payload, tokens, ms in events:
        recorder.emit(kind, payload, tokens=tokens, ms=ms)
    return recorder.entries()


def load_timeline(rr: RunResult, folder: Path | None = None, store: Any = None) -> Timeline:
    """The timeline of `rr`: saved beside it in `folder`, else from the run store (a pipeline.store.RunStore) when
    it recorded the run, else one entry per step with its wall time."""
    if folder is not None and RUN_ID.match(rr.run_id):
        path = Path(folder) / f"{rr.run_id}{TIMELINE_SUFFIX}"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return Timeline(origin="events", entries=[TimelineEntry.model_validate(e) for e in raw])
        except (OSError, ValueError, ValidationError):
            pass
    if store is not None:
        events = store.events(rr.run_id, kinds=TIMELINE_KINDS)
        if events:
            return Timeline(origin="run store", entries=timeline_of_events(
                (e.kind, e.payload, e.tokens, e.ms) for e in events))
    return Timeline(origin="timings", entries=[TimelineEntry(step=name, kind="step", label=name, ms=secs * 1000)
                                               for name, secs in step_times(rr).items()])

"""A suite's saved results: `summary.json` beside the saved runs of `benchmark_runs/<suite>/` (docs/BENCHMARK.md)."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.bench.grade import RunGrade
from pipeline.bench.summary import SuiteSummary

SUMMARY = "summary.json"


class BenchSummary(BaseModel):
    """What a bench wrote for one suite: its grades per run and its figures per mode."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    version: str
    corpus: str
    description: str = ""
    graded_at: str  # ISO 8601, UTC
    code_version: str
    git_commit: str | None = None
    stopped: str | None = Field(None, description="Why the bench stopped before every run was made, if it did.")
    questions: dict[str, str] = Field(default_factory=dict, description="Question id -> question text.")
    grades: list[RunGrade] = Field(default_factory=list)
    baseline: list[RunGrade] = Field(default_factory=list, description=(
        "The BM25 top-3 baseline's grade per question (bench/baseline.py), computed from the frozen web."))
    summary: SuiteSummary


def read_summary(folder: Path) -> BenchSummary | None:
    """`folder/summary.json`, or None when there is none or it is not a valid summary."""
    try:
        return BenchSummary.model_validate_json((Path(folder) / SUMMARY).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None

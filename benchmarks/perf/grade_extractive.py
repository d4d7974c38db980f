"""Run the extractive mode over every question of the news and pydocs suites in-process, grade each run, print."""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.bench.grade import RunGrade, grade_run  # noqa: E402
from pipeline.bench.suite import load_suite  # noqa: E402
from pipeline.bench.summary import grade_suite  # noqa: E402
from pipeline.config import Settings  # noqa: E402
from pipeline.core.schema import RunOptions, Source  # noqa: E402
from pipeline.research.orchestrator import research  # noqa: E402
from pipeline.web.corpus import Corpus  # noqa: E402
from pipeline.web.fetch import Fetcher  # noqa: E402


def grade(name: str) -> None:
    """Run, grade and print one suite."""
    suite = load_suite(ROOT / "benchmarks" / "suites" / f"{name}.json")
    folder = suite.corpus_dir(ROOT / "benchmarks" / "corpora")
    assert folder is not None, "a live suite is not run here"
    settings = Settings(corpus_dir=str(folder), search_provider="corpus")
    fetcher = Fetcher(settings, corpus=Corpus.open(folder))  # its cache makes each page extracted once

    def page_text(source: Source) -> str | None:
        return fetcher.fetch(source.url).text

    grades: list[RunGrade] = []
    started = time.monotonic()
    for q in suite.questions:
        result = research(q.question, settings, options=RunOptions(mode="extractive"))
        g = grade_run(q, result, page_text, max_sub_questions=suite.cap(q))
        grades.append(g)
        recall = "-" if g.answer_recall is None else f"{g.answer_recall:.2f}"
        gold = "-" if g.gold_page_recall is None else f"{g.gold_page_recall:.2f}"
        print(f"  {q.id:4} {q.kind:12} {'pass' if g.passed else 'FAIL'}  gold {gold:4}  answer {recall:4}  "
              f"{g.wall_seconds:5.2f}s  {', '.join(g.failed())}")
    s = grade_suite(grades, repeats=1).modes["extractive"]
    print(f"{name} (v{suite.version}, {len(suite.questions)} questions, {time.monotonic() - started:.1f} s): "
          f"pass {s.pass_rate}, gold-page recall {s.gold_page_recall}, answer recall {s.answer_recall}, "
          f"citation precision {s.citation_precision}, sentences cited {s.sentences_cited}, numbers in quotes "
          f"{s.numbers_in_quotes}, wall {s.wall_seconds_mean} s/question, cost ${s.cost_usd}, calls {s.model_calls}")
    print(f"  expectations met: {s.expectation_rate}")
    by_kind: dict[str, list[RunGrade]] = {}
    for q, g in zip(suite.questions, grades, strict=True):
        by_kind.setdefault(q.kind, []).append(g)
    print("  pass by kind: " + ", ".join(f"{k} {sum(g.passed for g in gs)}/{len(gs)}" for k, gs in by_kind.items()))


if __name__ == "__main__":
    for suite_name in sys.argv[1:] or ["news", "pydocs"]:
        grade(suite_name)

"""Extractive-mode figures on the shipped `news` corpus: speed, memory, and how often the right sentence is found.

    .venv/bin/python benchmarks/perf/extractive_bench.py [--suite benchmarks/perf/extractive_gold.json]

Prints:
- wall time and peak memory (max RSS) of one extractive run in a fresh process, the CLI's own path
  (`python -m pipeline run Q --mode extractive`), with the corpus index already built, and of the first open that
  builds it;
- over the gold questions (each answered by one sentence of one page): how often the gold page is among the run's
  sources, and how often a finding quotes the answer sentence; unanswerable questions: how many named a gap and
  recorded no finding; conflict questions: how many reported a conflict naming both pages.
Runs in-process through research() (the same code as the CLI), no network, no key; a temporary run store.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.config import SHIPPED_CORPORA, Settings  # noqa: E402
from pipeline.core.schema import RunOptions, RunResult  # noqa: E402
from pipeline.core.urls import url_key  # noqa: E402
from pipeline.research.orchestrator import research  # noqa: E402

ONE_RUN = """
import resource, sys, time
from pipeline.cli.main import main
started = time.perf_counter()
code = main(["run", sys.argv[1], "--mode", "extractive", "--quiet"])
wall = time.perf_counter() - started
print(f"WALL {wall:.3f} RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} EXIT {code}",
      file=sys.stderr)
"""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def quotes_answer(quote: str, answer: str) -> bool:
    """A finding quotes the answer sentence: one contains the other, or they share 80% of the answer's words."""
    q, a = " ".join(_words(quote)), " ".join(_words(answer))
    if not q or not a:
        return False
    if q in a or a in q:
        return True
    aw, qw = set(_words(answer)), set(_words(quote))
    return len(aw & qw) / len(aw) >= 0.8


def one_run(question: str, corpus: Path, db: Path) -> tuple[float, float, float]:
    """(seconds in the run, seconds of the whole process with its imports, max RSS MB) of one extractive CLI run."""
    env = {**os.environ, "RESEARCH_DB": str(db), "RESEARCH_CORPUS_DIR": str(corpus), "PYTHONPATH": str(ROOT)}
    env.pop("ANTHROPIC_API_KEY", None)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", ONE_RUN, question], env=env, capture_output=True, text=True,
                          check=False)
    process = time.perf_counter() - started
    m = re.search(r"WALL ([\d.]+) RSS (\d+) EXIT (\d+)", proc.stderr)
    if m is None:
        raise SystemExit(f"the run failed:\n{proc.stderr[-2000:]}")
    return float(m.group(1)), process, float(m.group(2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(ROOT / "benchmarks/perf/extractive_gold.json"))
    args = ap.parse_args()
    items = json.loads(Path(args.suite).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "news"
        shutil.copytree(SHIPPED_CORPORA / "news", corpus, ignore=shutil.ignore_patterns(".index*"))
        db = Path(tmp) / "runs.sqlite"
        question = items[0]["question"]
        cold, cold_process, cold_rss = one_run(question, corpus, db)  # builds the corpus index
        warm = [one_run(question, corpus, db) for _ in range(3)]
        print(f"one extractive run: {min(w[0] for w in warm):.2f} s in the run, {min(w[1] for w in warm):.2f} s for "
              f"the whole CLI process with its imports (best of 3; target < 2 s), peak RSS "
              f"{max(w[2] for w in warm):.0f} MB (target < 300 MB)")
        print(f"first run on a fresh copy of the corpus (builds its search index): {cold:.2f} s in the run, "
              f"{cold_process:.2f} s for the process, peak RSS {cold_rss:.0f} MB")

        settings = Settings(corpus_dir=str(corpus), db_path=str(db))
        options = RunOptions(mode="extractive")
        factual = [i for i in items if i["kind"] == "factual"]
        gold_hits = answer_hits = 0
        times: list[float] = []
        for item in factual:
            started = time.perf_counter()
            rr: RunResult = research(item["question"], settings, options=options)
            times.append(time.perf_counter() - started)
            keys = {url_key(u) for s in rr.sources for u in (s.url, s.final_url)}
            gold = url_key(item["gold_url"]) in keys
            answered = any(quotes_answer(f.quote, item["answer_sentence"]) for f in rr.findings)
            gold_hits += gold
            answer_hits += answered
            print(f"  {'page' if gold else '----'} {'answer' if answered else '------'}  {item['question']}")
        n = len(factual)
        print(f"gold page among the sources: {gold_hits}/{n} = {gold_hits / n:.2f} (target >= 0.8)")
        print(f"a finding quotes the answer sentence: {answer_hits}/{n} = {answer_hits / n:.2f} (target >= 0.6)")
        print(f"in-process run time: median {sorted(times)[n // 2]:.2f} s, max {max(times):.2f} s")

        unanswerable = [i for i in items if i["kind"] == "unanswerable"]
        honest = sum(1 for i in unanswerable if not (rr := research(i["question"], settings, options=options)).findings
                     and rr.report.gaps)
        print(f"unanswerable: {honest}/{len(unanswerable)} named a gap and recorded no finding")
        conflicts = [i for i in items if i["kind"] == "conflict"]
        shown = 0
        for item in conflicts:
            rr = research(item["question"], settings, options=options)
            by_id = {s.id: url_key(s.final_url) for s in rr.sources}
            findings = {f.id: by_id.get(f.source) for f in rr.findings}
            wanted = {url_key(s["url"]) for s in item["sources"]}
            shown += any({findings.get(i) for i in c.findings} == wanted for c in rr.report.conflicts)
        print(f"conflicts: {shown}/{len(conflicts)} reported with both pages side by side")


if __name__ == "__main__":
    main()

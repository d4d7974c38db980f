"""`python -m pipeline bench`: runs saved with what produced them, resume (after a kill too), shards that merge, the
dollar ceiling, crashes recorded as failed runs, and one-line errors. Every run goes to a temporary folder."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import pipeline
from pipeline.bench import runner
from pipeline.bench.runner import (
    BenchConfig,
    RunKey,
    Shard,
    find_suite,
    git_commit,
    parse_shard,
    run_bench,
    shard_from_env,
)
from pipeline.bench.saved import BenchSummary, read_summary
from pipeline.bench.suite import Suite
from pipeline.cli.main import main
from pipeline.config import SHIPPED_CORPORA, ConfigError, Settings
from pipeline.core.schema import RunResult
from pipeline.research.prompts import version as prompt_version
from pipeline.store.sql import SqliteRunStore
from pipeline.web.corpus import Corpus, CorpusPage, build_corpus
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.research_brain import ResearchBrain

ROOT = Path(__file__).resolve().parents[1]
NEWS = json.loads((ROOT / "benchmarks" / "suites" / "news.json").read_text(encoding="utf-8"))
# Two answerable questions and one unanswerable, from the shipped news suite.
MINI_QUESTIONS = [q for q in NEWS["questions"] if q["id"] in ("n01", "n02", "n21")]
TINY_PAGES = [
    ("https://qdrant.example/pricing", "Qdrant pricing",
     "Qdrant is an open-source vector database written in Rust. Qdrant Cloud pricing starts at 25 dollars per "
     "month for the smallest cluster."),
    ("https://milvus.example/pricing", "Milvus pricing",
     "Milvus is an open-source vector database with many GitHub stars. Zilliz Cloud pricing for Milvus starts at "
     "65 dollars per month."),
]
TINY_QUESTIONS = [
    {"id": "t1", "split": "dev", "question": "What does Qdrant Cloud pricing start at?", "kind": "single_page",
     "gold_pages": ["https://qdrant.example/pricing"], "answer_terms": ["25 dollars"]},
    {"id": "t2", "split": "test", "question": "What does Zilliz Cloud pricing for Milvus start at?",
     "kind": "single_page",
     "gold_pages": ["https://milvus.example/pricing"], "answer_terms": ["65 dollars"]},
]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpora folder with a copy of the shipped news corpus (its index built once) and a two-page `tiny` one."""
    root = tmp_path_factory.mktemp("corpora")
    shutil.copytree(SHIPPED_CORPORA / "news", root / "news", ignore=shutil.ignore_patterns(".index*"))
    Corpus.open(root / "news").close()
    build_corpus([CorpusPage(url=url, title=title, published="2025-01-15",
                             body=f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
                                  f"<p>{text}</p></article></body></html>".encode())
                  for url, title, text in TINY_PAGES], root / "tiny").close()
    return root


def write_suite(folder: Path, name: str, corpus: str, questions: list[dict[str, Any]], version: str = "1") -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"name": name, "version": version, "corpus": corpus, "questions": questions}),
                    encoding="utf-8")
    return path


@pytest.fixture()
def mini(tmp_path: Path) -> Path:
    return write_suite(tmp_path, "mini", "news", MINI_QUESTIONS)


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return write_suite(tmp_path, "tiny", "tiny", TINY_QUESTIONS)


@pytest.fixture()
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(ResearchBrain()) as f:
        yield f


def cli(args: list[str], tmp_path: Path, env: dict[str, str] | None = None, *,
        popen: bool = False) -> Any:
    """`python -m pipeline ARGS` in a child process: no keys, the run store in tmp_path, the network guard on."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RESEARCH_", "CLOUD_RUN_"))}
    full = {**full, "RESEARCH_DB": str(tmp_path / "runs.sqlite"), **(env or {})}
    cmd = [sys.executable, "-m", "pipeline", *args]
    if popen:
        return subprocess.Popen(cmd, env=full, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_as_from_a_terminal)
    return subprocess.run(cmd, env=full, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _as_from_a_terminal() -> None:
    """In the child before exec: Ctrl-C as a terminal delivers it. A runner that starts the tests in the background
    (`cmd &` in a script) leaves SIGINT ignored, which the child inherits, and Python then installs no
    KeyboardInterrupt handler: the interrupted bench would run to its end and exit 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_files(folder: Path) -> dict[str, RunResult]:
    """The saved runs in `folder` by file name."""
    return {p.name: RunResult.model_validate_json(p.read_bytes()) for p in sorted(folder.glob("*.json"))
            if p.name != "summary.json" and not p.name.endswith(".timeline.json")}


def keys_of(runs: dict[str, RunResult]) -> list[tuple[str, str, int]]:
    return sorted((r.bench.question_id, r.mode, r.bench.repeat) for r in runs.values() if r.bench)


def figures(summary: BenchSummary) -> dict[str, dict[str, Any]]:
    """Per-mode figures without what differs between two runs of the same thing (wall time)."""
    return {m: s.model_dump(exclude={"wall_seconds_mean"}) for m, s in summary.summary.modes.items()}


def settings_for(tmp_path: Path, fake: FakeAnthropic | None = None) -> Settings:
    if fake is None:
        return Settings(db_path=str(tmp_path / "runs.sqlite"))
    return Settings(db_path=str(tmp_path / "runs.sqlite"), anthropic_api_key="sk-ant-bench-test-key",
                    anthropic_base_url=fake.base_url)


@pytest.fixture()
def research_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The questions research() is called with by the runner."""
    calls: list[str] = []
    real = runner.research

    def counting(question: str, *args: Any, **kwargs: Any) -> RunResult:
        calls.append(question)
        return real(question, *args, **kwargs)
    monkeypatch.setattr(runner, "research", counting)
    return calls


def test_extractive_bench_end_to_end_through_the_cli(tmp_path: Path, corpora: Path, mini: Path) -> None:
    out = tmp_path / "out"
    args = ["bench", str(mini), "--modes", "extractive", "--out", str(out), "--corpora", str(corpora)]
    proc = cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "3 runs, 0 saved already" in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]
    assert len(lines) == 3 and re.fullmatch(r"\[1/3\] n01 extractive r1: complete, \d+ findings, \$0\.0000, "
                                            r"\d+\.\d s", lines[0]), proc.stderr
    assert "extractive: 3 runs of 3 questions" in proc.stdout

    folder = out / "mini"
    runs = run_files(folder)
    assert keys_of(runs) == [("n01", "extractive", 1), ("n02", "extractive", 1), ("n21", "extractive", 1)]
    with SqliteRunStore(tmp_path / "runs.sqlite") as store:
        for name, rr in runs.items():
            assert (folder / name.replace(".json", ".timeline.json")).is_file()
            b = rr.bench
            assert b is not None and (b.suite, b.suite_version, b.corpus) == ("mini", "1", "news")
            assert (b.code_version, b.prompt_hash) == (pipeline.__version__, prompt_version())
            assert b.models == {"lead": "none", "worker": "none"}
            assert b.git_commit is None or re.fullmatch(r"[0-9a-f]{40}", b.git_commit)
            assert datetime.fromisoformat(b.date).utcoffset() is not None
            stored = store.result(rr.run_id)  # recorded in the run store, with its BenchInfo
            assert stored is not None and stored.bench == b
    summary = read_summary(folder)
    assert summary is not None and summary.stopped is None
    assert [g.question_id for g in summary.grades] == ["n01", "n02", "n21"]
    assert summary.summary.modes["extractive"].citation_precision == 1.0
    assert summary.questions["n21"] == "Who won the 2019 Tour de France?"

    again = cli(args, tmp_path)  # everything is saved: nothing is run again
    assert again.returncode == 0, again.stderr
    assert "3 runs, 3 saved already" in again.stderr and not re.search(r"^\[\d", again.stderr, re.M)
    assert run_files(folder).keys() == runs.keys()
    assert not (ROOT / "benchmark_runs" / "mini").exists()


def test_resume_makes_only_the_runs_not_saved(tmp_path: Path, corpora: Path, mini: Path,
                                              research_calls: list[str]) -> None:
    suite = find_suite(str(mini))
    config = BenchConfig(modes=["extractive"], repeat=2, out=tmp_path / "out", corpora=corpora)
    first = run_bench(suite, settings_for(tmp_path), config)
    assert (first.made, len(research_calls)) == (6, 6)
    folder = tmp_path / "out" / "mini"
    runs = run_files(folder)

    second = run_bench(suite, settings_for(tmp_path), config)
    assert (second.made, second.saved_before, len(research_calls)) == (0, 6, 6)

    name, gone = next((n, r) for n, r in runs.items() if r.bench and r.bench.question_id == "n02")
    (folder / name).unlink()
    third = run_bench(suite, settings_for(tmp_path), config)
    assert (third.made, len(research_calls)) == (1, 7) and research_calls[-1] == gone.question
    now = run_files(folder)
    assert keys_of(now) == keys_of(runs) and set(runs) - {name} < set(now)
    assert len(third.summary.grades) == 6


def test_a_killed_and_an_interrupted_bench_resume_without_repeating(tmp_path: Path, corpora: Path,
                                                                    mini: Path) -> None:
    out = tmp_path / "out"
    folder = out / "mini"
    # Enough runs that the bench cannot finish them all between one poll of the folder and the signal after it.
    repeats = 20
    total = repeats * len(MINI_QUESTIONS)
    args = ["bench", str(mini), "--modes", "extractive", "--repeat", str(repeats), "--out", str(out),
            "--corpora", str(corpora)]

    def start_and_stop(sig: int, after: int) -> tuple[subprocess.Popen[str], dict[str, RunResult]]:
        """Start the bench, send `sig` once `after` runs are saved in all, wait for it to end."""
        proc = cli(args, tmp_path, popen=True)
        deadline = time.monotonic() + 60
        while len(run_files(folder)) < after and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        return proc, run_files(folder)

    killed, after_kill = start_and_stop(signal.SIGKILL, 1)
    assert killed.returncode == -signal.SIGKILL and 1 <= len(after_kill) < total

    interrupted, after_int = start_and_stop(signal.SIGINT, len(after_kill) + 1)
    assert interrupted.returncode == 130 and len(after_kill) < len(after_int) < total
    assert set(after_kill) <= set(after_int)
    summary = read_summary(folder)
    assert summary is not None and summary.stopped and "interrupted" in summary.stopped

    done = cli(args, tmp_path)
    assert done.returncode == 0, done.stderr
    final = run_files(folder)
    assert set(after_int) <= set(final) and len(final) == total
    assert keys_of(final) == sorted({(q["id"], "extractive", r) for q in MINI_QUESTIONS
                                     for r in range(1, repeats + 1)})
    summary = read_summary(folder)
    assert summary is not None and summary.stopped is None and len(summary.grades) == total


def test_shards_write_into_one_folder_and_merge_to_the_figures_of_one(tmp_path: Path, corpora: Path,
                                                                      mini: Path) -> None:
    suite = find_suite(str(mini))
    whole = run_bench(suite, settings_for(tmp_path), BenchConfig(modes=["extractive"], repeat=2,
                                                                 out=tmp_path / "one", corpora=corpora))
    common = ["bench", str(mini), "--modes", "extractive", "--repeat", "2", "--out", str(tmp_path / "two"),
              "--corpora", str(corpora), "--quiet"]
    first = cli([*common, "--shard", "1/2"], tmp_path)
    assert first.returncode == 0, first.stderr
    keys = runner.plan_runs(suite, ["extractive"], 2)
    folder = tmp_path / "two" / "mini"
    assert keys_of(run_files(folder)) == sorted((k.question_id, k.mode, k.repeat) for k in keys[0::2])
    second = cli(common, tmp_path, {"CLOUD_RUN_TASK_INDEX": "1", "CLOUD_RUN_TASK_COUNT": "2"})  # shard 2/2
    assert second.returncode == 0, second.stderr

    # The merge, graded from the corpus alone: this run store never saw the runs, and is not created.
    fresh_db = tmp_path / "elsewhere.sqlite"
    merged = cli(["bench", str(mini), "--summary-only", "--out", str(tmp_path / "two"), "--corpora", str(corpora)],
                 tmp_path, {"RESEARCH_DB": str(fresh_db)})
    assert merged.returncode == 0, merged.stderr
    assert not fresh_db.exists()
    summary = read_summary(folder)
    assert summary is not None
    assert keys_of(run_files(folder)) == keys_of(run_files(tmp_path / "one" / "mini"))
    assert [(g.question_id, g.mode, g.repeat) for g in summary.grades] == \
        [(g.question_id, g.mode, g.repeat) for g in whole.summary.grades]
    assert figures(summary) == figures(whole.summary)
    assert summary.summary.modes["extractive"].citation_precision == 1.0


def test_shard_arguments_and_cloud_run_variables() -> None:
    assert parse_shard("2/3") == Shard(index=2, count=3)
    assert shard_from_env({"CLOUD_RUN_TASK_INDEX": "0", "CLOUD_RUN_TASK_COUNT": "3"}) == Shard(index=1, count=3)
    assert shard_from_env({}) is None
    for bad in ("0/2", "3/2", "1", "a/b"):
        with pytest.raises(ConfigError, match="--shard"):
            parse_shard(bad)
    with pytest.raises(ConfigError, match="CLOUD_RUN_TASK_COUNT"):
        shard_from_env({"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "2"})
    keys = [RunKey(question_id=f"q{i}", mode="extractive", repeat=1) for i in range(5)]
    assert Shard(index=1, count=2).take(keys) + Shard(index=2, count=2).take(keys) == keys[0::2] + keys[1::2]


def test_fixed_and_tools_against_the_fake_model(tmp_path: Path, corpora: Path, tiny: Path,
                                                fake: FakeAnthropic) -> None:
    settings = settings_for(tmp_path, fake)
    outcome = run_bench(find_suite(str(tiny)), settings,
                        BenchConfig(modes=["fixed", "tools"], out=tmp_path / "out", corpora=corpora))
    assert (outcome.made, outcome.crashed, outcome.stopped) == (4, 0, None)
    runs = run_files(tmp_path / "out" / "tiny")
    assert keys_of(runs) == [("t1", "fixed", 1), ("t1", "tools", 1), ("t2", "fixed", 1), ("t2", "tools", 1)]
    for rr in runs.values():
        assert rr.status in ("complete", "partial") and rr.usage.model_calls > 0 and rr.usage.cost_usd > 0
        assert rr.bench is not None and rr.bench.models["lead"] == settings.lead_model
        assert rr.bench.models["prompts"] == prompt_version() and rr.bench.corpus == "tiny"
    assert len(fake.requests) == sum(r.usage.model_calls for r in runs.values())
    modes = outcome.summary.summary.modes
    assert set(modes) == {"fixed", "tools", "baseline"}  # the reference row is computed beside the modes run
    assert modes["baseline"].model_calls == 0 and len(outcome.summary.baseline) == 2
    assert set(outcome.summary.summary.splits) == {"dev", "test"}  # t1 is dev, t2 test
    for m in (modes["fixed"], modes["tools"]):
        assert m.runs == 2 and m.model_calls > 0 and m.input_tokens > 0 and m.output_tokens > 0
        assert m.citation_precision in (1.0, None)  # quotes re-checked against the run store's page text
    assert all(g.quote_failures == [] for g in outcome.summary.grades)


def test_the_dollar_ceiling_stops_the_bench(tmp_path: Path, corpora: Path, tiny: Path, fake: FakeAnthropic) -> None:
    # A run starts only while a tenth of the $2 per-question budget is left: the first run ($0.001 or more with the
    # fake's token counts) leaves less than that of $0.201.
    env = {"ANTHROPIC_API_KEY": "sk-ant-bench-test-key", "ANTHROPIC_BASE_URL": fake.base_url}
    out = tmp_path / "out"
    proc = cli(["bench", str(tiny), "--modes", "extractive,fixed", "--max-usd", "0.201", "--out", str(out),
                "--corpora", str(corpora)], tmp_path, env)
    assert proc.returncode == 1, proc.stderr
    assert "stopped: the $0.20 ceiling was reached" in proc.stdout
    runs = run_files(out / "tiny")
    # the free extractive runs are all made; of the model runs only the first, on what was left of the ceiling
    assert keys_of(runs) == [("t1", "extractive", 1), ("t1", "fixed", 1), ("t2", "extractive", 1)]
    paid = next(r for r in runs.values() if r.mode == "fixed")
    assert paid.budget.limits.cost_usd == pytest.approx(0.201) and 0 < paid.usage.cost_usd <= 0.201
    summary = read_summary(out / "tiny")
    assert summary is not None and summary.stopped and "1 model run(s) not made" in summary.stopped


def test_a_crashed_run_is_saved_as_failed_and_the_suite_goes_on(tmp_path: Path, corpora: Path) -> None:
    # A corpus whose manifest is damaged after the bench checked it (the CLI checks every corpus before the first
    # run, so a corpus missing or damaged from the start is a configuration error: exit 2, nothing run).
    broken = tmp_path / "corpora"
    shutil.copytree(corpora / "tiny", broken / "tiny")
    (broken / "broken").mkdir()
    (broken / "broken" / "manifest.jsonl").write_text("{not json\n", encoding="utf-8")
    questions = [TINY_QUESTIONS[0], {**TINY_QUESTIONS[1], "corpus": "broken"}]
    suite = find_suite(str(write_suite(tmp_path, "crash", "tiny", questions)))
    config = BenchConfig(modes=["extractive"], out=tmp_path / "out", corpora=broken)
    outcome = run_bench(suite, settings_for(tmp_path), config)
    assert (outcome.made, outcome.crashed) == (2, 1)
    runs = {r.bench.question_id: r for r in run_files(tmp_path / "out" / "crash").values() if r.bench}
    assert runs["t1"].status == "complete" and runs["t2"].status == "failed"
    assert runs["t2"].problems[0].kind == "bench_crash" and "ConfigError" in runs["t2"].problems[0].message
    assert runs["t2"].bench is not None and runs["t2"].bench.corpus == "broken"
    modes = outcome.summary.summary.modes["extractive"]
    assert "run_failed" in modes.failed_questions["t2"] and "t1" not in modes.failed_questions
    # a saved run counts whatever its status: the next bench does not make it again
    assert run_bench(suite, settings_for(tmp_path), config).made == 0


def test_a_crash_makes_the_cli_exit_1(tmp_path: Path, corpora: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    real = runner.research

    def flaky(question: str, *args: Any, **kwargs: Any) -> RunResult:
        if "Milvus" in question:
            raise RuntimeError("a bug")
        return real(question, *args, **kwargs)
    monkeypatch.setattr(runner, "research", flaky)
    monkeypatch.setenv("RESEARCH_DB", str(tmp_path / "runs.sqlite"))
    rc = main(["bench", str(tiny), "--modes", "extractive", "--out", str(tmp_path / "out"),
               "--corpora", str(corpora)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "[2/2] t2 extractive r1: failed (crashed: RuntimeError: a bug)" in err
    assert "1 run(s) crashed" in err
    assert len(run_files(tmp_path / "out" / "tiny")) == 2


@pytest.mark.parametrize(("change", "expected"), [
    (lambda qs: qs[1].update(kind="riddle"), r"question 't2' \(#2\), field 'kind'"),
    (lambda qs: qs[0].pop("question"), r"question 't1' \(#1\), field 'question': Field required"),
])
def test_a_suite_with_a_schema_error_is_one_line_naming_file_question_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, expected: str) -> None:
    questions = json.loads(json.dumps(TINY_QUESTIONS))
    change(questions)
    path = write_suite(tmp_path, "bad", "tiny", questions)
    assert main(["bench", str(path), "--modes", "extractive", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and re.search(expected, err), err
    assert not (tmp_path / "out").exists()


def test_usage_errors_exit_2_before_any_run(tmp_path: Path, corpora: Path, tiny: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RESEARCH_DB", str(tmp_path / "runs.sqlite"))
    out = ["--out", str(tmp_path / "out"), "--corpora", str(corpora)]
    missing = write_suite(tmp_path, "gone", "tiny", [TINY_QUESTIONS[0], {**TINY_QUESTIONS[1], "corpus": "nowhere"}])
    cases = [
        (["bench", "no-such-suite"], "no such suite file, nor a suite of that name"),
        (["bench", str(tiny), "--modes", "fixed", *out], "ANTHROPIC_API_KEY"),
        (["bench", str(tiny), "--modes", "extractive,sideways", *out], "'sideways' is not a mode"),
        (["bench", str(tiny), "--modes", "extractive", "--shard", "3/2", *out], "--shard"),
        (["bench", str(tiny), "--modes", "extractive", "--max-usd", "0", *out], "--max-usd"),
        (["bench", str(missing), "--modes", "extractive", *out], "question 't2': corpus 'nowhere'"),
        (["bench", str(tiny), "--summary-only", *out], "no saved runs of suite tiny"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert main(["bench", str(tiny), "--modes", "tools", *out]) == 2
    assert "Or pass --modes extractive" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_suite_is_found_by_name_among_the_shipped_ones() -> None:
    suite: Suite = find_suite("news")
    assert suite.name == "news" and len(suite.questions) >= 30


def test_commit_comes_from_the_image_build_when_there_is_no_git(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH, as in the container image
    try:
        sha = "0123456789abcdef0123456789abcdef01234567"
        for given, expected in [(sha.upper(), sha), ("not-a-commit", None), ("", None)]:
            git_commit.cache_clear()
            monkeypatch.setenv("VERBATIM_GIT_COMMIT", given)
            assert git_commit() == expected
    finally:
        git_commit.cache_clear()

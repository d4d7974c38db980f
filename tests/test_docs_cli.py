"""Research over a folder of one's own files through the real command line: `run --docs`, RESEARCH_DOCS_DIR,
`docs check`, replay; and old RunResult files still load unchanged."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.config import Settings
from pipeline.core.event_types import SearchEvent
from pipeline.core.schema import RunOptions, RunResult
from pipeline.web.docs_index import DocsIndex
from tests.fakes.documents import docx_bytes, encrypted_pdf, pdf_bytes, report_pages, write
from tests.fakes.stores import open_test_store

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What was the reactor output in March 2023?"
PAGE_14 = "The reactor output rose to 41 megawatts in March 2023.\nOperators confirmed the new reactor output figure."


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m pipeline ARGS` in a child process with `env` added; no key, the network guard on."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RESEARCH_"))}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], env={**full, **env}, capture_output=True,
                          text=True, timeout=300, cwd=ROOT, check=False)


def listing(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(folder)), p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*"))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "my files"
    write(folder, {
        "reports/annual review.pdf": pdf_bytes(report_pages(20, {14: PAGE_14}), title="Annual review"),
        "plant.docx": docx_bytes("Plant report", [("Summary", ["The plant opened in 1998."])],
                                 [["Year", "Output"], ["2022", "38 MW"]], "Figures are provisional."),
        "notes/tides.md": "---\ntitle: Notes on tides\n---\n# Tides\n\nThe moon pulls the water twice a day.\n",
        "locked.pdf": encrypted_pdf(["Secret page."]),
    })
    return folder


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"RESEARCH_CACHE_DIR": str(tmp_path / "cache"), "RESEARCH_DB": str(tmp_path / "runs.sqlite")}


def test_run_over_a_folder_cites_the_page_of_each_quote(docs: Path, tmp_path: Path) -> None:
    before = listing(docs)
    out = tmp_path / "out.json"
    done = cli(["run", QUESTION, "--docs", str(docs), "--mode", "extractive", "--json", str(out)], env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "files done" in done.stderr and "1 refused" in done.stderr  # progress: files done, per second, failures
    result = RunResult.model_validate_json(out.read_text(encoding="utf-8"))
    assert result.status == "complete" and result.usage.fetches == 0 and result.usage.documents >= 1
    assert [(p.kind, "locked.pdf (the PDF is encrypted and needs a password)" in p.message)
            for p in result.problems] == [("documents_refused", True)]  # named, and the run is not held up by it
    sources = {s.id: s for s in result.sources}
    assert all(s.kind == "document" and s.url == f"doc:{s.path}".replace(" ", "%20") for s in sources.values())
    on_page = [f for f in result.findings if sources[f.source].path == "reports/annual review.pdf"]
    assert on_page and all(f.location is not None and f.location.page == 14 for f in on_page)
    index = DocsIndex.open(docs, Settings(cache_dir=str(tmp_path / "cache")))  # type: ignore[call-arg]
    for f in result.findings:  # every quote is the file's text at its offsets
        assert index.document(sources[f.source].path or "").text[f.start:f.end] == f.quote
    index.close()
    assert "reports/annual review.pdf, p. 14" in result.report.markdown.rsplit("\n## Sources\n", 1)[1]
    assert "doc:" not in done.stdout.split("## Sources")[0]  # no identifier is shown as a link in the body
    assert listing(docs) == before  # nothing written into the user's folder
    raw = json.loads(out.read_text(encoding="utf-8"))
    assert raw["findings"][0]["location"]["page"] == 14 and raw["sources"][0]["kind"] == "document"


def test_the_folder_from_the_environment_and_a_replay_of_the_run(docs: Path, tmp_path: Path) -> None:
    env = {**env_for(tmp_path), "RESEARCH_DOCS_DIR": str(docs)}
    first, again = tmp_path / "first.json", tmp_path / "again.json"
    assert cli(["run", QUESTION, "--mode", "extractive", "--json", str(first), "--quiet"], env).returncode == 0
    original = RunResult.model_validate_json(first.read_text(encoding="utf-8"))
    replayed = cli(["replay", original.run_id, "--json", str(again), "--quiet"], env_for(tmp_path))
    assert replayed.returncode == 0, replayed.stderr
    copy = RunResult.model_validate_json(again.read_text(encoding="utf-8"))
    assert copy.findings == original.findings and copy.sources == original.sources
    assert copy.usage.documents == original.usage.documents and copy.report.markdown == original.report.markdown
    assert copy.problems == original.problems and [p.kind for p in copy.problems] == ["documents_refused"]
    assert "the replay matches the recorded result" in replayed.stderr


def test_docs_check_lists_files_and_refusals(docs: Path, tmp_path: Path) -> None:
    checked = cli(["docs", "check", str(docs), "--quiet"], env_for(tmp_path))
    assert checked.returncode == 1
    lines = checked.stdout.splitlines()
    assert "ok       reports/annual review.pdf  pdf, 20 pages with text" in "\n".join(lines)
    assert any(line.startswith("ok       plant.docx  docx") for line in lines)
    assert "refused  locked.pdf  the PDF is encrypted and needs a password" in lines
    (docs / "locked.pdf").unlink()
    assert cli(["docs", "check", str(docs), "--quiet"], env_for(tmp_path)).returncode == 0
    missing = cli(["docs", "check", str(tmp_path / "nowhere")], env_for(tmp_path))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr


def test_an_interrupted_run_over_a_folder_resumes_reading_the_same_folder(docs: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "runs.sqlite")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    with open_test_store(db) as store:  # a run whose process died after its first search
        recorder = store.recorder("r1")
        recorder.start(question=QUESTION, options=RunOptions(mode="extractive", docs=str(docs.resolve())),
                       models={}, prompt_version="v")
        recorder.emit(SearchEvent(query="unrelated words", provider="documents", n=5, results=[]))
        recorder.stop()
        assert store.db.execute("UPDATE runs SET pid = ? WHERE id = 'r1'", (int(dead.stdout),)).rowcount == 1
    for name, value in env_for(tmp_path).items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "resumed.json"
    assert main(["resume", "r1", "--json", str(out), "--quiet"]) == 0  # no --docs: the recorded folder is read
    result = RunResult.model_validate_json(out.read_text(encoding="utf-8"))
    assert {s.kind for s in result.sources} == {"document"}
    assert any(f.location is not None and f.location.page == 14 for f in result.findings)
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "corpus")
    with open_test_store(db) as store:
        assert store.db.execute("UPDATE runs SET status = 'running', pid = ? WHERE id = 'r1'",
                                (int(dead.stdout),)).rowcount == 1
    capsys.readouterr()
    assert main(["resume", "r1", "--quiet"]) == 2  # its searches were of the folder alone
    refused = capsys.readouterr().err
    assert "searched its documents folder only; resume it with RESEARCH_SEARCH_PROVIDER unset" in refused


def test_old_run_results_load_and_write_back_unchanged() -> None:
    saved = sorted((ROOT / "benchmark_runs").glob("*/*.json"))
    runs = [p for p in saved if not p.name.endswith(".timeline.json") and p.name != "summary.json"][:40]
    assert runs
    for path in runs:
        raw = json.loads(path.read_text(encoding="utf-8"))
        again = json.loads(RunResult.model_validate(raw).model_dump_json())
        assert again == raw, path

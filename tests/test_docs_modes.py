"""The model modes over a documents folder: the real SDK against the fake model API, the folder as the only source;
every finding a quote of a file at its offsets, PDF findings with the page the quote is on."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.core.schema import RunOptions
from pipeline.research.orchestrator import research
from pipeline.web.docs_index import DocsIndex
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.documents import pdf_bytes, report_pages, write
from tests.fakes.research_brain import ResearchBrain

PAGE_9 = ("Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster.\n"
          "Qdrant is an open-source vector database with many GitHub stars.")


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(ResearchBrain()) as api:
        yield api


@pytest.mark.parametrize("mode", ["fixed", "tools"])
def test_a_model_mode_researches_the_folder(mode: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write(docs, {"vendors/qdrant.pdf": pdf_bytes(report_pages(12, {9: PAGE_9}), title="Qdrant pricing"),
                 "milvus.md": "# Milvus pricing\n\nZilliz Cloud pricing for Milvus starts at 65 dollars per month.\n"})
    settings = Settings.model_validate({"ANTHROPIC_API_KEY": "sk-ant-docs-test-key",
                                        "ANTHROPIC_BASE_URL": fake.base_url, "docs_dir": str(docs),
                                        "cache_dir": str(tmp_path / "cache"), "model_max_retries": 2})
    result = research("Compare pricing of Qdrant and Milvus vector databases", settings,
                      options=RunOptions(mode=mode))  # type: ignore[arg-type]
    assert result.findings and result.status in ("complete", "partial")
    assert result.usage.fetches == 0 and result.usage.documents >= 1
    sources = {s.id: s for s in result.sources}
    assert all(s.kind == "document" and s.url.startswith("doc:") for s in sources.values())
    assert "vendors/qdrant.pdf" in {sources[f.source].path for f in result.findings}
    index = DocsIndex.open(docs, settings)
    for f in result.findings:
        assert index.document(sources[f.source].path or "").text[f.start:f.end] == f.quote
        if sources[f.source].path == "vendors/qdrant.pdf":
            assert f.location is not None and f.location.page == 9
        else:
            assert f.location is not None and f.location.heading == "Milvus pricing"
    index.close()

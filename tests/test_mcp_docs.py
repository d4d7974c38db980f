"""The MCP server's documents folders: research(docs=NAME) and list_documents(NAME) over the folders the server was
started with (RESEARCH_MCP_DOCS), a path from the client refused, through the real server subprocess."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import ConfigError, Settings
from pipeline.mcp.docs import parse_folders
from pipeline.mcp.limits import McpSettings
from pipeline.mcp.server import Tools
from tests.fakes.documents import encrypted_pdf, pdf_bytes, report_pages, write
from tests.test_mcp import Client, text_of

QUESTION = "What was the reactor output in March 2023?"
PAGE_14 = "The reactor output rose to 41 megawatts in March 2023.\nOperators confirmed the new reactor output figure."


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("mcpdocs")
    papers, other = tmp / "papers", tmp / "other"
    write(papers, {
        "reports/annual review.pdf": pdf_bytes(report_pages(20, {14: PAGE_14}), title="Annual review"),
        "notes/tides.md": "---\ntitle: Notes on tides\n---\n# Tides\n\nThe moon pulls the water twice a day.\n",
        "locked.pdf": encrypted_pdf(["Secret page."]),
    })
    write(other, {"secret.md": "# Not offered\n\nThe reactor output was 99 megawatts in March 2023.\n"})
    return papers, other


@pytest.fixture(scope="module")
def client(folders: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    papers, _ = folders
    tmp = tmp_path_factory.mktemp("mcpserver")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RESEARCH_"))}
    env |= {"RESEARCH_MCP_DOCS": f"papers={papers}", "RESEARCH_CACHE_DIR": str(tmp / "cache"),
            "RESEARCH_DB": str(tmp / "runs.sqlite")}
    c = Client(env, tmp / "server.log")
    yield c
    c.close()


def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result, _ = client.call(tool, args)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


def test_list_documents_shows_the_indexed_files_and_the_refused_ones(client: Client) -> None:
    listed = call(client, "list_documents", {"folder": "papers"})
    by_path = {d["path"]: d for d in listed["documents"]}
    assert listed["folder"] == "papers" and listed["count"] == 2
    assert by_path["reports/annual review.pdf"]["pages"] == 20 and by_path["reports/annual review.pdf"]["kind"] == "pdf"
    assert by_path["notes/tides.md"]["title"] == "Notes on tides"
    assert [r["path"] for r in listed["refused"]] == ["locked.pdf"] and listed["refused"][0]["reason"]
    assert "papers" in (client.tools()["list_documents"].description or "")


@pytest.mark.parametrize("name", ["other", "/etc", "../other", "papers/../other", ""])
def test_a_folder_the_server_was_not_given_is_refused_by_name(client: Client, folders: tuple[Path, Path],
                                                              name: str) -> None:
    for tool, args in (("list_documents", {"folder": name or str(folders[1])}),
                       ("research", {"question": QUESTION, "mode": "extractive", "docs": name or str(folders[1])})):
        result, _ = client.call(tool, args)
        assert result.is_error, tool
        assert "is not a documents folder of this server" in text_of(result) and "papers" in text_of(result)


def test_research_over_a_named_folder_cites_the_page_of_the_quote(client: Client) -> None:
    answer = call(client, "research", {"question": QUESTION, "mode": "extractive", "docs": "papers"})
    assert answer["status"] in ("complete", "partial") and answer["usage"]["model_calls"] == 0
    sources = {s["id"]: s for s in answer["sources"]}
    cited = [f for f in answer["findings"] if "41 megawatts" in f["quote"]]
    assert cited, answer["findings"]
    finding = cited[0]
    assert finding["location"]["page"] == 14 and finding["url"].startswith("doc:")
    source = sources[finding["source"]]
    assert source["kind"] == "document" and source["path"] == "reports/annual review.pdf"
    assert not any("99 megawatts" in f["quote"] for f in answer["findings"])  # the folder it was not given


def test_the_folder_list_is_checked_when_the_server_starts(folders: tuple[Path, Path], tmp_path: Path) -> None:
    papers, other = folders
    assert parse_folders(f"{papers}, notes={other}") == {"papers": papers.resolve(), "notes": other.resolve()}
    assert parse_folders("") == {}
    for raw, words in ((f"a={tmp_path / 'missing'}", "is not a folder"), (f"a={papers},a={other}", "given twice"),
                       (f"bad name={papers}", "not a folder name")):
        with pytest.raises(ConfigError, match=words) as caught:
            Tools(Settings(), McpSettings(docs=raw))
        assert "RESEARCH_MCP_DOCS" in str(caught.value)

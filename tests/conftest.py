"""Test-wide setup: no network beyond loopback, here and in child processes; a clean environment; a real PostgreSQL
server (started once, on loopback) for the tests that run on both database backends."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

GUARD_DIR = Path(__file__).parent / "netguard"
sys.path.insert(0, str(GUARD_DIR))
import no_network  # noqa: E402

no_network.install()
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(GUARD_DIR), str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH", "")) if p
)

# Variables a developer's shell may carry that would change what the tests see.
_OUR_VARS = [
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "RESEARCH_LEAD_MODEL",
    "RESEARCH_WORKER_MODEL", "RESEARCH_SEARCH_PROVIDER", "BRAVE_API_KEY", "TAVILY_API_KEY",
    "RESEARCH_SEARXNG_URL", "RESEARCH_SEARCH_BASE_URL", "RESEARCH_FETCH_ALLOW", "RESEARCH_DB",
    "RESEARCH_PRICES", "RESEARCH_FETCH_PORTS", "RESEARCH_CORPUS_DIR", "RESEARCH_HEARTBEAT_STALE", "RESEARCH_DOCS_DIR",
    "RESEARCH_CACHE_DIR", "RESEARCH_DOCS_MAX_BYTES", "HTTP_PROXY",
    "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
]
for _name in _OUR_VARS:
    os.environ.pop(_name, None)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without our variables; tests set what they need with monkeypatch."""
    for name in _OUR_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """The test PostgreSQL server (tests/fakes/postgres_server.py); the test fails, never skips, without one."""
    from tests.fakes.postgres_server import PostgresUnavailable, postgres_server

    with ExitStack() as stack:
        try:
            server = stack.enter_context(postgres_server())
        except PostgresUnavailable as e:
            pytest.fail(str(e), pytrace=False)
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """RESEARCH_DB for a test that runs on both backends: a new SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "state" / "research.sqlite")
        return
    server = request.getfixturevalue("pg_server")
    with server.database() as url:  # type: ignore[attr-defined]
        yield url

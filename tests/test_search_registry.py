"""The search provider registry: one entry per provider, agreeing with the settings and the run store's scrubbing."""
from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import SecretStr

from pipeline.config import ConfigError, SearchProviderName, Settings
from pipeline.store.sql import settings_secrets
from pipeline.web.corpus import CorpusPage, build_corpus
from pipeline.web.search.registry import PROVIDERS, make_provider, provider_entry, require_search_access

SECRET_NAME = ("key", "token", "secret", "password")


def _satisfied(tmp_path: Path) -> dict[str, Any]:
    """Settings values that meet every provider's requirement."""
    corpus = tmp_path / "corpus"
    build_corpus([CorpusPage("https://example.org/a", b"<html><body><p>Europa has water plumes.</p></body></html>")],
                 corpus)
    return {"brave_api_key": "brave-key-1", "tavily_api_key": "tavily-key-2", "anthropic_api_key": "sk-ant-key-3",
            "searxng_url": "http://127.0.0.1:9", "corpus_dir": str(corpus)}


def test_the_registry_names_exactly_the_providers_the_settings_accept() -> None:
    assert tuple(PROVIDERS) == get_args(SearchProviderName)
    assert all(name == entry.name for name, entry in PROVIDERS.items())


def test_every_setting_an_entry_names_is_a_field_of_settings() -> None:
    fields = set(Settings.model_fields)
    for entry in PROVIDERS.values():
        assert entry.requires is None or entry.requires.field in fields, entry.name
        assert set(entry.secrets) <= fields, entry.name


def test_every_secret_of_every_provider_is_scrubbed_by_the_store() -> None:
    values = {field: f"secret-{entry.name}-{field}" for entry in PROVIDERS.values() for field in entry.secrets}
    assert values, "no provider declares a secret"
    scrubbed = settings_secrets(Settings(**values))
    for field, value in values.items():
        assert value in scrubbed, f"{field} is not scrubbed by the run store: declare it as SecretStr in Settings"


def test_every_setting_named_like_a_secret_is_a_secretstr_and_scrubbed() -> None:
    secret_like = [name for name in Settings.model_fields if any(word in name for word in SECRET_NAME)]
    assert {"anthropic_api_key", "brave_api_key", "tavily_api_key"} <= set(secret_like)
    settings = Settings(**{name: f"value-of-{name}" for name in secret_like})
    for name in secret_like:
        assert isinstance(getattr(settings, name), SecretStr), name
        assert f"value-of-{name}" in settings_secrets(settings), name


@pytest.mark.parametrize("name", [n for n, e in PROVIDERS.items() if e.requires is not None])
def test_a_provider_without_its_setting_names_the_variable(name: str, tmp_path: Path) -> None:
    entry = PROVIDERS[name]
    assert entry.requires is not None
    values = {**_satisfied(tmp_path), entry.requires.field: ""}
    with pytest.raises(ConfigError, match=f"RESEARCH_SEARCH_PROVIDER={name} needs {entry.requires.env}"):
        require_search_access(Settings(search_provider=name, **values))
    with pytest.raises(ConfigError, match=entry.requires.env):
        make_provider(Settings(search_provider=name, **values))


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_make_provider_builds_the_provider_of_each_entry(name: str, tmp_path: Path) -> None:
    settings = Settings(search_provider=name, **_satisfied(tmp_path))
    require_search_access(settings)

    def server_web_search(query: str, n: int, recency_days: int | None) -> list[dict[str, Any]]:
        return []

    assert make_provider(settings, server_web_search=server_web_search).name == name


def test_the_anthropic_provider_needs_the_model_clients_search() -> None:
    with pytest.raises(ValueError, match="server_web_search"):
        make_provider(Settings(search_provider="anthropic", anthropic_api_key="sk-ant-key"))


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="use brave, tavily, searxng, anthropic or corpus"):
        provider_entry("bing")

"""Checks made before a run is started (and paid for): the settings its mode needs are there and work."""
from __future__ import annotations

from pipeline.config import ConfigError, Settings
from pipeline.web.corpus import Corpus
from pipeline.web.docs_pages import searches_web
from pipeline.web.folder import folder_root
from pipeline.web.search.registry import require_search_access


class NoModelAccess(ConfigError):
    """A run that needs a model cannot reach one (no key, or a model with no price); the message names the fix."""


def require_run_access(settings: Settings, mode: str) -> None:
    """ConfigError naming the setting to fix when a run in `mode` could not start: a model key (not for
    extractive runs), the search provider's setting, a corpus that opens, and a documents folder that is one."""
    if mode != "extractive":
        try:
            settings.require_model_access()
        except ConfigError as e:
            raise NoModelAccess(str(e)) from None
    if settings.docs_dir is not None:
        folder_root(settings.docs_dir)  # a documents folder that is not one is one clear line too
        if not searches_web(settings):
            return
    require_search_access(settings)
    if settings.search_provider == "corpus":
        Corpus.open(settings.corpus_dir).close()  # a missing or damaged corpus is one clear line, before a run starts

"""Small frozen webs built in a test's folder, in the format pipeline/web/corpus.py reads."""
from __future__ import annotations

from pathlib import Path

from pipeline.web.corpus import CorpusPage, build_corpus

QDRANT_QUESTION = "What does Qdrant Cloud pricing start at?"
QDRANT_QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."


def qdrant_corpus(folder: Path) -> Path:
    """A one-page frozen web whose page answers QDRANT_QUESTION with QDRANT_QUOTE; returns `folder`."""
    build_corpus([CorpusPage(url="https://qdrant.example/pricing", title="Qdrant pricing", published="2025-01-15",
                             body=("<html><head><title>Qdrant pricing</title></head><body><article><h1>Qdrant pricing"
                                   "</h1><p>Qdrant is an open-source vector database written in Rust.</p>"
                                   f"<p>{QDRANT_QUOTE}</p></article></body></html>").encode())], folder)
    return folder

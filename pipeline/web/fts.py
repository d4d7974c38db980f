"""The full-text index the frozen web and a documents folder share: SQLite FTS5 tables, BM25 with the title weighted.

Two FTS5 tables keyed by the rowid of the caller's own table of items: `docs` (title, body) for ranking, and `leads`
(the first LEAD_CHARS of the body) for snippets.
"""
from __future__ import annotations

import re
import sqlite3
from typing import NamedTuple

TITLE_WEIGHT = 5.0
# Snippets come from the first LEAD_CHARS of a page only, held in a table of their own: FTS5's snippet() walks
# every instance of every query term in the row, so on a page that repeats a common word one search took 23 s
# (60,000 "the"), and still 6 s with the lead as a column of the same row. Ranking reads the whole body.
LEAD_CHARS = 20_000
MAX_QUERY_TERMS = 32
_WORD = re.compile(r"\w+")
TABLES = """
    CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize = 'unicode61 remove_diacritics 2');
    CREATE VIRTUAL TABLE leads USING fts5(lead, tokenize = 'unicode61 remove_diacritics 2');
"""


def fts_query(query: str) -> str | None:
    """The words of `query` as an FTS5 OR-query, each quoted so operators (AND, NEAR, *, ^, column:) are plain words."""
    terms = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:MAX_QUERY_TERMS]
    return " OR ".join(f'"{t}"' for t in terms) or None


def add_text(db: sqlite3.Connection, rowid: int, title: str | None, text: str) -> None:
    """Index the item `rowid` (a row of the caller's table) under its title and text."""
    db.execute("INSERT INTO docs (rowid, title, body) VALUES (?, ?, ?)", (rowid, title or "", text))
    db.execute("INSERT INTO leads (rowid, lead) VALUES (?, ?)", (rowid, text[:LEAD_CHARS]))


def remove_text(db: sqlite3.Connection, rowid: int) -> None:
    """Take the item `rowid` out of the index."""
    db.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))
    db.execute("DELETE FROM leads WHERE rowid = ?", (rowid,))


class Hit(NamedTuple):
    """One item a search found: the value of its key column, its title and date, and a snippet."""

    key: str
    title: str | None
    published: str | None
    snippet: str


def hits(db: sqlite3.Connection, table: str, key: str, query: str, n: int) -> list[Hit]:
    """Up to `n` items of `table` whose indexed text best matches the words of `query` (BM25, the title weighted),
    each named by its `key` column; [] when nothing matches. The table has columns id, `key`, title, published."""
    match = fts_query(query)
    if match is None or n < 1:
        return []
    sql = (f"SELECT t.id, t.{key}, t.title, t.published FROM docs JOIN {table} t ON t.id = docs.rowid "
           f"WHERE docs MATCH ? ORDER BY bm25(docs, {TITLE_WEIGHT}, 1.0) LIMIT ?")
    return [Hit(str(k), title or None, published or None, snippet(db, rowid, match))
            for rowid, k, title, published in db.execute(sql, (match, n)).fetchall()]


def snippet(db: sqlite3.Connection, rowid: int, match: str) -> str:
    """About 32 words of the item's lead around the query's terms, else the lead's first words, on one line."""
    row = db.execute("SELECT snippet(leads, 0, '', '', '…', 32) FROM leads WHERE leads MATCH ? AND "
                     "rowid = ?", (match, rowid)).fetchone()
    if row is None:
        row = db.execute("SELECT substr(lead, 1, 240) FROM leads WHERE rowid = ?", (rowid,)).fetchone()
    return " ".join(str(row[0]).split()) if row and row[0] else ""

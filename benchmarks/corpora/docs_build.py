"""Builds benchmarks/corpora/docs/, the documents corpus of the `docs` suite, byte for byte; `--check-suite` checks
that every answer_page of benchmarks/suites/docs.json holds its answer terms in the built PDF.

    .venv/bin/python benchmarks/corpora/docs_build.py [--check-suite]

What's New In Python 3.11 (PSF licence, from the pydocs frozen web) becomes a PDF laid out here; two pydocs pages are
copied as .html; the handbook (.docx) and the notes (.md) are the project's own text, written below.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import shutil
import sys
import tempfile
import textwrap
import unicodedata
import zipfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # pipeline and tests.fakes, when run as a script

CORPORA = ROOT / "benchmarks" / "corpora"
OUT, PYDOCS, SUITE = CORPORA / "docs", CORPORA / "pydocs", ROOT / "benchmarks" / "suites" / "docs.json"
PDF_NAME, BASE = "python-3.11-whatsnew.pdf", "https://docs.python.org/3.11/"
WIDTH, LINES = 90, 42  # characters a line; text lines a page (then a blank line and the footer: 44 at 16 pt)
HTML = {"whatsnew/3.10.html": "python-3.10-whatsnew.html", "library/collections.html": "collections.html"}
_ASCII = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "--", "\u2248": "~"}
_GLUE = re.compile(r"\b(PEP|bpo|gh|Python|Unicode|Tcl/Tk|SQLite|OpenSSL|C) (?=\d)")  # never wrapped apart
FIXED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

HANDBOOK = """# Verbatim operator handbook
This handbook is for whoever runs Verbatim for other people: who deploys it, sets its limits, hands out the access
code and answers when a run goes wrong. It describes the project as shipped; the README is the reference.
# Deploying
## Where it runs
A push to main deploys to Cloud Run once CI has passed on it. The image starts with python -m ui.serve, which serves
Streamlit on the port Cloud Run gives it. Every deploy is a revision running an image tagged with its commit.
While the run store is a SQLite file on the instance, the service is capped at one instance (--max-instances=1): a
second instance would keep its own daily spend ceiling and its own wrong-code counter. A shared PostgreSQL database
is what lifts that cap.
## Secrets
Secrets come from Secret Manager, and each one is readable by the runtime service account only. The access code
must be at least 12 characters; the app refuses a shorter one. It is mounted as a file and read again every 300
seconds (RESEARCH_ACCESS_CODE_TTL), so a new version of the secret takes effect within five minutes with no
redeploy and no restart. Disable the old version afterwards so it can never come back. Model and search keys are
pinned to a version, so a new key is a deliberate deploy. Without a model key the app still deploys: visitors with
the code can run the extractive mode only, and the Live page says why the other modes are off.
## Rolling back
List the revisions, then send all traffic to the one you want with gcloud run services update-traffic and
--to-revisions=REVISION=100. The next push to main takes all traffic again, so revert the bad commit if you need to
stay on the old code for longer. --to-latest undoes a manual rollback.
# Limits
## Budgets
Every run has a hard budget that no step can exceed. A model call reserves its worst-case cost before it is sent
and is settled from the real usage the API reports. A reserve, 30 percent of each limit, is held back from research
so that the writer and the reviewer always have something left. The defaults for one run are in this table.
| limit | default for one run | what it counts |
| searches | 30 | queries sent to the search provider |
| fetches | 40 | web pages fetched and extracted |
| document reads | 40 | files of a documents folder read |
| model calls | 80 | requests to the lead and worker models |
| input tokens | 1,500,000 | tokens sent to the models |
| output tokens | 150,000 | tokens the models wrote |
| cost ceiling | $2.00 | dollars, from the price table |
## Live runs
The Live research page runs at most 2 runs at once (RESEARCH_LIVE_MAX_CONCURRENT). All visitors share a daily spend
ceiling of $5 (RESEARCH_LIVE_DAILY_USD), and one run may spend at most $2 (RESEARCH_LIVE_MAX_RUN_USD). A visitor
who enters a wrong code 5 times within a 900-second window is locked out for the rest of it; an IPv6 /64 counts as
one visitor, and 50 wrong codes in total close the door to everyone until the window ends.
## Uploads
A visitor with the code may upload at most 10 files for one live run, 20 MB each and 50 MB in all. Names are cut to
their last part and every file is created exclusively, never through a link. The files and their index are removed
when the run ends. A documents folder on the server reads no file larger than 100 MB (RESEARCH_DOCS_MAX_BYTES).
# Running research
## Modes
The fixed mode lets code run the searches and a model read the pages; the tools mode gives each sub-question a
model worker with its own tools; the extractive mode uses no model at all, costs nothing and needs no key. Its
reports name their models "none".
## Documents
python -m pipeline docs check DIR reads a folder and lists every refused file with its reason, exiting 1 when any
was refused. The index lives in the cache folder (RESEARCH_CACHE_DIR), never in the documents folder, and a file
whose size, modification time and content hash are unchanged is never read again.
# When something goes wrong
## An interrupted run
A run whose process sends no heartbeat for 60 seconds (RESEARCH_HEARTBEAT_STALE) is taken for dead: it is shown as
interrupted, its spend reservation is released, and python -m pipeline resume RUN_ID continues it without repeating
a recorded call.
## A full disk
When the run store cannot be written, the run stops there with a store_failed problem that names the database.
Free the disk, then resume the run: nothing already recorded is asked again.
"""
NOTES = {"notes/citations.md": """---
title: How a citation is checked
date: 2026-11-20
---
# How a citation is checked
Every finding is a verbatim quote, and code, not a model, decides whether the quote is real.
## Locating the quote
The quote finder looks for the quote in the full text the run extracted from the source. It forgives what models
do to quotes (case, whitespace, curly quotes, dashes, ellipses, soft hyphens, line-break hyphenation) but never a
changed word, a changed number, a dropped "not", pieces out of order, a cut word, or a quote shorter than 15
characters. A quote it cannot find is rejected with its reason and never reaches the report.
## Pages and headings
For a document the finding records where the quote sits. A PDF page is computed from the quote's start offset
against the page starts of the extracted text, never taken from chunk metadata; a Word or Markdown finding records
its heading path instead. The benchmark computes the page again from the file and fails citations_verified when a
run recorded another one.
""", "notes/extractive.md": """---
title: The extractive mode, without a model
date: 2026-11-27
---
# The extractive mode, without a model
The extractive mode runs the same steps as the other modes with no model anywhere: no key, no network for models,
and a cost of zero.
## Splitting and reading
Code splits the question into at most 4 parts and reads in each part what is asked: a person, a figure, a date. The
fixed researcher gathers 3 pages per part and reads on through the search results while the fetch budget allows.
## Choosing sentences
Among the sentences that offer an answer of the asked type, BM25 ranks them and a sentence is kept within half the
best one's score. A part that nothing answers becomes a named gap instead of a guess.
"""}


def _page_html(path: str) -> bytes:
    """The saved bytes of the pydocs page at BASE + path."""
    lines = (PYDOCS / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    saved = {e["url"]: e["path"] for e in map(json.loads, lines)}
    return gzip.decompress((PYDOCS / saved[BASE + path]).read_bytes())


def _latin1(line: str) -> str:
    """The line as Helvetica (WinAnsi, latin-1 here) can show it: close ASCII for the rest."""
    line = re.sub(r"\s*\((?:[^\x00-\xff]|\s)+\)", "", line.rstrip("\u00b6").translate(str.maketrans(_ASCII)))
    out = (unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode() or "?" if ord(c) > 255 else c
           for c in line)
    return "".join(out)


def whatsnew_pages() -> list[str]:
    """What's New In Python 3.11, extracted from the pydocs page and laid out in pages of wrapped lines."""
    from pipeline.web.extract import extract_html

    page = extract_html(_page_html("whatsnew/3.11.html").decode("utf-8"), BASE + "whatsnew/3.11.html", outline=True)
    starts, at, lines = {h.start for h in page.headings}, 0, []
    for raw in page.text.split("\n"):
        heading, at = at in starts, at + len(raw) + 1
        line = _latin1(raw.rstrip())
        if heading and lines:
            lines.append("")
        indent = re.match(r"\s*", line).group()
        glued = _GLUE.sub(lambda m: m.group(1) + "\xa0", line.strip())
        lines += [w.replace("\xa0", " ") for w in textwrap.wrap(
            glued, WIDTH, initial_indent=indent, subsequent_indent=indent + ("  " if indent else ""),
            break_on_hyphens=False) or [""]]
        if heading:
            lines.append("\x00")  # a heading is never the last line of a page
    pages: list[list[str]] = []
    while lines:
        cut = min(LINES, len(lines))
        while cut < len(lines) and (lines[cut] == "\x00" or lines[cut - 1] == "\x00") and cut > LINES - 4:
            cut -= 1
        body = [x for x in lines[:cut] if x != "\x00"]
        lines = lines[cut:]
        while lines and lines[0] in ("", "\x00"):
            lines.pop(0)
        pages.append(body)
    return ["\n".join(body + [""] * (LINES - len(body)) + ["", f"Page {n}"]) for n, body in enumerate(pages, 1)]


def write_pdf(folder: Path) -> int:
    """The 3.11 PDF, dated by the 3.11.0 release (2022-10-24) instead of the helper's fixed date; its page count."""
    from tests.fakes.documents import pdf_bytes

    pages = whatsnew_pages()
    data = pdf_bytes(pages, "What's New In Python 3.11")
    assert data.count(b"D:20240315120000Z") == 1  # same length: the xref offsets stay right
    (folder / PDF_NAME).write_bytes(data.replace(b"D:20240315120000Z", b"D:20221024000000Z"))
    return len(pages)


def write_docx(folder: Path) -> None:
    """The handbook as a Word file: Heading 1/2 sections, one table, fixed core properties and zip dates."""
    import docx

    document = docx.Document()
    props = document.core_properties
    props.title, props.author, props.last_modified_by, props.revision = "Verbatim operator handbook", "Verbatim", "", 1
    props.created = props.modified = FIXED
    rows: list[list[str]] = []
    for line in [*HANDBOOK.splitlines(), ""]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
            continue
        if rows:
            grid = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    grid.cell(r, c).text = cell
            rows = []
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            document.add_heading(line[level:].strip(), level=0 if line.startswith("# Verbatim") else level)
        elif line and document.paragraphs[-1].style.name == "Normal":
            document.paragraphs[-1].add_run(" " + line)
        elif line:
            document.add_paragraph(line)
    raw = io.BytesIO()
    document.save(raw)
    out = io.BytesIO()
    with zipfile.ZipFile(raw) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in sorted(source.infolist(), key=lambda i: i.filename != "[Content_Types].xml"):
            fixed = zipfile.ZipInfo(item.filename, date_time=FIXED.timetuple()[:6])
            target.writestr(fixed, source.read(item.filename), zipfile.ZIP_DEFLATED)
    (folder / "handbook.docx").write_bytes(out.getvalue())


def build() -> None:
    """(Re)write the whole folder, and the README and licence kept beside it."""
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "notes").mkdir(parents=True)
    pages = write_pdf(OUT)
    write_docx(OUT)
    for name, text in NOTES.items():
        (OUT / name).write_text(text, encoding="utf-8")
    for path, name in HTML.items():
        (OUT / name).write_bytes(_page_html(path))
    shutil.copyfile(PYDOCS / "LICENSE", CORPORA / "docs-LICENSE-PSF")
    print(f"{OUT.relative_to(ROOT)}: {PDF_NAME} ({pages} pages), handbook.docx, {len(NOTES)} notes, {len(HTML)} pages")


def check_suite(folder: Path = OUT, suite: Path = SUITE) -> list[str]:
    """Why each answer_page of the suite is wrong: an answer group with no occurrence on that page of the PDF."""
    from pipeline.config import Settings
    from pipeline.core.location import locate
    from pipeline.web.docs_index import DocsIndex

    questions = json.loads(suite.read_text(encoding="utf-8"))["questions"]
    with tempfile.TemporaryDirectory() as cache:
        index = DocsIndex.open(folder, Settings(cache_dir=cache))
        try:
            doc = index.document(PDF_NAME)
        finally:
            index.close()
    failures = []
    for q in (q for q in questions if q.get("answer_page")):
        for group in q["answer_terms"]:
            group = [group] if isinstance(group, str) else group
            found = {locate(doc.layout, m.start(), m.end()).page for t in group for m in re.finditer(
                r"(?<![\w.])" + r"\s+".join(map(re.escape, t.split())) + r"(?!\w|[.,]\d)", doc.text, re.I)}
            if q["answer_page"] not in found:
                failures.append(f"{q['id']}: {group} not on p. {q['answer_page']} (found on {sorted(found)})")
    return failures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-suite", action="store_true", help="check the suite's answer pages; build nothing")
    if not parser.parse_args().check_suite:
        sys.exit(build())
    problems = check_suite()
    print("\n".join(problems) or f"every answer_page of {SUITE.relative_to(ROOT)} holds its answer terms")
    sys.exit(1 if problems else 0)

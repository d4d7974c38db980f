"""Rebuild the frozen-web corpora shipped in benchmarks/corpora/ (one sub-command per corpus).

    python benchmarks/corpora/build.py news   [--src ../shared/data/extraction] [--out benchmarks/corpora/news]
    python benchmarks/corpora/build.py pydocs [--deb FILE.deb | --package python3.11-doc] [--out DIR]
    python benchmarks/corpora/build.py diverse [--src ../shared/data/extraction-diverse] [--out DIR]
    python benchmarks/corpora/build.py abilities [ABILITY ...]   # abilities/<ability>.json -> webs and suites
    python benchmarks/corpora/build.py blind    # blind-specs/<ability>.json -> blind/ webs and suites/blind.json

Each corpus folder is what pipeline/web/corpus.py reads: `manifest.jsonl` (one JSON object a line,
`{"url", "path", "content_type", "title"?, "published"?}`, `path` relative to the folder) and the saved
bytes under `pages/` (gzip). A LICENSE and a README sit beside them. The output is deterministic: the
same input gives byte-identical files (gzip with mtime 0, sorted manifest).

Only the standard library, lxml and htmldate are used (both in the project's .venv); nothing is imported
from `pipeline`, so the script keeps working while the package moves.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import date, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MANIFEST = "manifest.jsonl"

# ---------------------------------------------------------------------------------------------- helpers


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _write_manifest(out: Path, entries: list[dict[str, str]]) -> None:
    entries = sorted(entries, key=lambda e: e["path"])
    lines = [json.dumps(e, ensure_ascii=False, sort_keys=False) for e in entries]
    (out / MANIFEST).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _fresh_pages_dir(out: Path) -> Path:
    pages = out / "pages"
    if pages.exists():
        shutil.rmtree(pages)
    pages.mkdir(parents=True)
    for stale in (out / ".index.sqlite",):  # the corpus reader's cache; it is rebuilt on first open
        stale.unlink(missing_ok=True)
    return pages


def _parse_html(data: bytes):  # -> lxml.html.HtmlElement
    import lxml.html

    # A parsed tree (never a str) goes to htmldate: htmldate downloads any string that looks like a URL.
    return lxml.html.document_fromstring(data)


# ---------------------------------------------------------------------------------------------- news

_URL_DATE = re.compile(r"/((?:19|20)\d\d)[/-](\d\d?|[a-z]{3})[/-](\d\d?)(?:/|$|-)", re.I)
_MON = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def _url_date(url: str) -> str | None:
    """A date written in the URL path: /2019/11/18/, /2019-11-18-, /2019/nov/18/."""
    m = _URL_DATE.search(url)
    if not m:
        return None
    month = int(m[2]) if m[2].isdigit() else (_MON.index(m[2].lower()) + 1 if m[2].lower() in _MON else 0)
    try:
        return date(int(m[1]), month, int(m[3])).isoformat()
    except ValueError:
        return None


def news_date(html: bytes, url: str) -> str | None:
    """A publication date for a news page only when it is reliable, else None.

    Reliable means: htmldate finds an original date in the page's metadata (meta tags, JSON-LD, <time>
    elements; `extensive_search=False`, so no guessing from free text), the date is plausible for this
    data set (2000 to 2021), and when the URL itself carries a date the two agree within two days
    (time zones and late-night publishing move the day).
    """
    from htmldate import find_date

    try:
        tree = _parse_html(html)
        found = find_date(tree, url=url, extensive_search=False, original_date=True, outputformat="%Y-%m-%d")
    except Exception:
        return None
    if not found:
        return None
    try:
        day = date.fromisoformat(found)
    except ValueError:
        return None
    if not date(2000, 1, 1) <= day <= date(2021, 12, 31):
        return None
    in_url = _url_date(url)
    if in_url and abs((date.fromisoformat(in_url) - day).days) > 2:
        return None
    return found


NEWS_README = """# `news`: a frozen web of 121 real news and blog pages

Source: the article-extraction benchmark by Scrapinghub (now Zyte),
<https://github.com/scrapinghub/article-extraction-benchmark>, MIT licence (see `LICENSE` beside this
file, kept as it came). The pages are the benchmark's `html/<id>.html.gz` files copied byte for byte
(gzipped HTML as saved in 2019-2020); the URLs are the benchmark's ground truth (`ground-truth.json`,
`{{id: {{url, articleBody}}}}`). The hand-annotated article bodies are not shipped here.

`manifest.jsonl` lists each page as `{{"url", "path", "content_type"[, "published"]}}`. `published` is
given for {dated} of {total} pages, only where it is reliable: htmldate finds the original date in the
page's metadata (no free-text guessing), it falls in 2000-2021, and it agrees (within two days) with a
date in the URL when the URL has one. Elsewhere it is left out and the fetcher's own extraction decides.

Rebuild (needs the shared data folder; output is byte-identical):

    .venv/bin/python benchmarks/corpora/build.py news --src ../shared/data/extraction
"""


def build_news(src: Path, out: Path) -> None:
    truth = json.loads((src / "ground-truth.json").read_text(encoding="utf-8"))
    _fresh_pages_dir(out)
    entries = []
    for page_id, item in sorted(truth.items()):
        raw = (src / "html" / f"{page_id}.html.gz").read_bytes()
        name = f"pages/{page_id}.html.gz"
        (out / name).write_bytes(raw)
        entry = {"url": item["url"], "path": name, "content_type": "text/html"}
        published = news_date(gzip.decompress(raw), item["url"])
        if published:
            entry["published"] = published
        entries.append(entry)
    _write_manifest(out, entries)
    shutil.copyfile(src / "LICENSE", out / "LICENSE")
    dated = sum(1 for e in entries if "published" in e)
    (out / "README.md").write_text(NEWS_README.format(dated=dated, total=len(entries)), encoding="utf-8")
    print(f"news: {len(entries)} pages ({dated} dated) -> {out}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------- pydocs

DOC_PACKAGE = "python3.11-doc"
DOC_VERSION = "3.11"  # the docs.python.org folder the URLs point to
# Library and reference pages kept besides all of whatsnew/: modules added or much changed across
# Python 3 versions, so that questions like "which version added X" have dated, differing sources.
DOC_PAGES = [
    "library/asyncio-task.html", "library/collections.html", "library/contextlib.html",
    "library/dataclasses.html", "library/datetime.html", "library/enum.html", "library/functions.html",
    "library/functools.html", "library/graphlib.html", "library/hashlib.html", "library/itertools.html",
    "library/json.html", "library/math.html", "library/pathlib.html", "library/re.html",
    "library/secrets.html", "library/sqlite3.html", "library/statistics.html", "library/string.html",
    "library/subprocess.html", "library/tomllib.html", "library/typing.html", "library/zoneinfo.html",
    "reference/compound_stmts.html", "reference/lexical_analysis.html",
]
_MONTHS = str.split("""
    January February March April May June July August September October November December
""")
# "Python 3.8 was released on October 14, 2019." / "Python 2.4.1, released on March 30, 2005."
_RELEASED = re.compile(r"\breleased\s+on\s+(" + "|".join(_MONTHS) + r")\s+(\d{1,2}),\s+(\d{4})")


def _text(tree) -> str:
    return " ".join(tree.text_content().split())


def doc_title(tree) -> str | None:
    """The page's <h1> without Sphinx's pilcrow link: "What’s New In Python 3.8"."""
    for h1 in tree.iter("h1"):
        text = " ".join("".join(h1.itertext()).replace("\u00b6", "").split())
        if text:
            return text
    return None


def doc_release_date(tree) -> str | None:
    """The release date a whatsnew page states in its opening paragraphs, ISO; None when it states none.

    Only the opening is read (the paragraphs between the <h1> and the first sub-section, or the paragraphs
    of that first sub-section when it is the "Introduction"), and the first "released on <date>" there is
    taken, so dates of other releases that the article mentions further down are never used. The "Date:"
    field of Sphinx's header is the day the documentation was built (the Debian package build), not a
    release date, and is ignored.
    """
    body = tree.find(".//section")
    if body is None:
        return None
    head = []
    for child in body:
        if child.tag == "section":
            heading = child.find("h2")
            if heading is not None and _text(heading).startswith("Introduction"):
                head.extend(_text(p) for p in child if p.tag == "p")
            break
        if child.tag in ("p", "div"):
            head.append(_text(child))
    m = _RELEASED.search(" ".join(head))
    if not m:
        return None
    return datetime(int(m[3]), _MONTHS.index(m[1]) + 1, int(m[2])).date().isoformat()


def _license_text(copyright_file: Path, package: str, version: str, docver: str) -> str:
    text = copyright_file.read_text(encoding="utf-8")
    start = text.index("Python License\n==============")
    end = text.index("Licenses and Acknowledgements for Incorporated Software")
    return (f"The pages in this folder are the Python {docver} documentation, Copyright (c) Python Software\n"
            f"Foundation (see the footer of each page), as shipped in the Debian package {package} {version}.\n"
            f"They are distributed under the Python license below, taken unchanged from that package's\n"
            f"/usr/share/doc/{package}/copyright (its 'Python License' section; the rest of that file lists\n"
            f"the licences of third-party code incorporated in Python).\n\n"
            + text[start:end].rstrip() + "\n")


PYDOCS_README = """# `pydocs`: a frozen web of Python {docver} documentation pages

A second kind of frozen web besides `news`: reference documentation, where the same feature is described
by several pages written for different releases (every "What's New In Python X.Y", {first} to {last}, plus
{nlib} library and reference pages of the {docver} docs). Questions such as "which version added
`math.isqrt`?" or "when was Python 3.6 released?" have dated, sometimes differing, sources.

Source: the Debian package `{package}` version `{version}` (`{deb}`, sha256 `{sha}`), its HTML under
`/usr/share/doc/python{docver}/html/`. Each page is stored gzipped, byte for byte as in the package,
under the canonical public URL `https://docs.python.org/{docver}/<path>`. Relative links, images and
stylesheets are not shipped (the extractor does not need them).

Licence: Python Software Foundation License Version 2 (and the older licences in its history), see
`LICENSE`, copied from the package's copyright file.

`manifest.jsonl`: `title` is the page's <h1>. `published` is given for {dated} of the {nwhat} whatsnew
pages, the release date each states in its opening ("Python 3.8 was released on October 14,
2019."; the 2.2 and 2.4 articles describe the point releases 2.2.2 and 2.4.1 and give their dates). It is left out where
the page states no release date ({undated}) and for every library and reference page: the "Date:" and
"Last updated on" lines of these pages give the day the Debian package was built, not when the text was
written, and the fetcher's own date extraction may still pick that build date up when no override is given.

Rebuild (downloads the .deb with `apt-get download`, unpacks with `dpkg-deb -x`, installs nothing):

    .venv/bin/python benchmarks/corpora/build.py pydocs --package {package}
    # or, from a .deb already downloaded:
    .venv/bin/python benchmarks/corpora/build.py pydocs --deb {deb}

A newer package version may change pages; the sha256 above identifies the one used here.
"""


def _fetch_deb(package: str, workdir: Path) -> Path:
    subprocess.run(["apt-get", "download", package], cwd=workdir, check=True)
    debs = sorted(workdir.glob(f"{package}_*.deb"))
    if not debs:
        raise SystemExit(f"apt-get download {package} produced no .deb in {workdir}")
    return debs[-1]


def build_pydocs(deb: Path | None, package: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="pydocs-") as tmp:
        work = Path(tmp)
        deb = deb.resolve() if deb else _fetch_deb(package, work)
        package, _, rest = deb.name.partition("_")
        version = rest.rsplit("_", 1)[0]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "x")], check=True)
        docver = re.sub(r"^python|-doc$", "", package) or DOC_VERSION
        html = work / "x" / "usr" / "share" / "doc" / f"python{docver}" / "html"
        if not html.is_dir():
            raise SystemExit(f"no HTML documentation at {html} in {deb.name}")
        whatsnew = sorted(p.relative_to(html).as_posix() for p in (html / "whatsnew").glob("*.html"))
        versions = sorted((v for v in (Path(w).stem for w in whatsnew) if re.fullmatch(r"\d+\.\d+", v)),
                          key=lambda v: tuple(map(int, v.split("."))))
        missing = [rel for rel in DOC_PAGES if not (html / rel).is_file()]
        if missing:
            print(f"pydocs: not in this package, left out: {', '.join(missing)}", file=sys.stderr)
        _fresh_pages_dir(out)
        entries = []
        for rel in whatsnew + [rel for rel in DOC_PAGES if rel not in missing]:
            raw = (html / rel).read_bytes()
            tree = _parse_html(raw)
            name = "pages/" + rel.replace("/", "_") + ".gz"
            (out / name).write_bytes(_gzip(raw))
            entry = {"url": f"https://docs.python.org/{docver}/{rel}", "path": name, "content_type": "text/html"}
            title = doc_title(tree)
            if title:
                entry["title"] = title
            if rel.startswith("whatsnew/"):
                released = doc_release_date(tree)
                if released:
                    entry["published"] = released
            entries.append(entry)
        _write_manifest(out, entries)
        copyright_file = work / "x" / "usr" / "share" / "doc" / package / "copyright"
        (out / "LICENSE").write_text(_license_text(copyright_file, package, version, docver), encoding="utf-8")
        sha = hashlib.sha256(deb.read_bytes()).hexdigest()
        dated = sum(1 for e in entries if "published" in e)
        (out / "README.md").write_text(PYDOCS_README.format(
            docver=docver, package=package, version=version, deb=deb.name, sha=sha, nlib=len(entries) - len(whatsnew),
            first=versions[0], last=versions[-1],
            dated=dated, nwhat=len(whatsnew),
            undated=", ".join(e["url"].rsplit("/", 1)[1] for e in entries
                              if "/whatsnew/" in e["url"] and "published" not in e)), encoding="utf-8")
    print(f"pydocs: {len(entries)} pages ({dated} dated) -> {out}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="corpus", required=True)
    news = sub.add_parser("news", help="the 121 pages of the Scrapinghub article-extraction benchmark")
    news.add_argument("--src", type=Path, default=REPO.parent / "shared" / "data" / "extraction")
    news.add_argument("--out", type=Path, default=HERE / "news")
    docs = sub.add_parser("pydocs", help="Python documentation pages from a Debian python3.X-doc package")
    docs.add_argument("--deb", type=Path, help="a downloaded .deb (default: apt-get download --package)")
    docs.add_argument("--package", default=DOC_PACKAGE)
    docs.add_argument("--out", type=Path, default=HERE / "pydocs")
    diverse = sub.add_parser("diverse", help="the 47 test pages of Mozilla Readability")
    diverse.add_argument("--src", type=Path, default=REPO.parent / "shared" / "data" / "extraction-diverse")
    diverse.add_argument("--out", type=Path, default=HERE / "diverse")
    four = sub.add_parser("abilities", help="the four-ability suites and their frozen webs, from abilities/*.json")
    four.add_argument("names", nargs="*", help="abilities to build (default: every spec in abilities/)")
    sub.add_parser("blind", help="the blind suite and its frozen webs, from blind-specs/*.json")
    args = parser.parse_args(argv)
    if args.corpus == "blind":
        from abilities import build_blind  # beside this script

        n = build_blind(HERE / "blind-specs", HERE, REPO / "benchmarks" / "suites")
        print(f"blind: {n} questions -> {HERE / 'blind'}", file=sys.stderr)
        return 0
    if args.corpus == "abilities":
        from abilities import build_ability, build_brief  # beside this script

        for spec in sorted((HERE / "abilities").glob("*.json")):
            if not args.names or spec.stem in args.names:
                n = build_ability(spec, HERE, REPO / "benchmarks" / "suites")
                print(f"{spec.stem}: {n} questions -> {HERE / spec.stem}", file=sys.stderr)
        n = build_brief(HERE / "abilities", REPO / "benchmarks" / "suites")
        print(f"brief: {n} questions -> benchmarks/suites/brief.json", file=sys.stderr)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.corpus == "news":
        build_news(args.src, args.out)
    elif args.corpus == "diverse":
        from diverse import build_diverse  # beside this script

        build_diverse(args.src, args.out, _write_manifest, _fresh_pages_dir)
        print(f"diverse -> {args.out}", file=sys.stderr)
    else:
        build_pydocs(args.deb, args.package, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `diverse` frozen web: the 47 pages of Mozilla Readability's test suite from ../shared/data/extraction-diverse.

Called by build.py (`build.py diverse`). Each page keeps its bytes; its URL is the canonical address the page
declares (`<link rel="canonical">` or `og:url`), else a reserved `.example` address named after the test page, so
no URL is invented for a real site. Standard library and lxml only, like build.py.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

_ID = re.compile(r"^readability-(?P<name>[a-z0-9-]+)$")

README = """# `diverse`: a frozen web of {total} real pages of many kinds

Source: the test pages of Mozilla Readability (<https://github.com/mozilla/readability>,
`test/test-pages/<name>/source.html`), Apache-2.0 (see `LICENSE` beside this file), as shipped in the project's
shared data (`extraction-diverse/html/<id>.html.gz`, copied byte for byte). Blogs, documentation, news with heavy
layout, forums, a Wikipedia article, an RFC, a book chapter, fiction, and pages in French, German, Japanese and
Chinese.

`manifest.jsonl` lists each page as `{{"url", "path", "content_type"}}`. The original addresses were not recorded
with the pages: the URL is the canonical address the page itself declares (`<link rel="canonical">` or
`og:url`, {canonical} of {total} pages), else `https://<name>.readability-test.example/` (a reserved domain, RFC
2606). No `published` date is given: the fetcher's own extraction decides, as it would on the live web.

Rebuild (needs the shared data folder; output is byte-identical):

    .venv/bin/python benchmarks/corpora/build.py diverse --src ../shared/data/extraction-diverse
"""


def canonical_url(html: bytes) -> str | None:
    """The page's own canonical address (link rel=canonical, else og:url), when it is an absolute http(s) URL."""
    import lxml.html

    tree = lxml.html.document_fromstring(html)
    found = tree.xpath('//link[translate(@rel, "CANONICAL", "canonical")="canonical"]/@href') + tree.xpath(
        '//meta[@property="og:url"]/@content')
    for url in found:
        url = url.strip()
        if re.match(r"https?://[^\s/]+\.[^\s/]+/", url):
            return url
    return None


def build_diverse(src: Path, out: Path, write_manifest, fresh_pages_dir) -> None:
    """Copy every page of `src` into `out` with a manifest, a README and the licence."""
    truth = json.loads((src / "ground-truth.json").read_text(encoding="utf-8"))
    fresh_pages_dir(out)
    entries, canonical = [], 0
    for page_id in sorted(truth):
        m = _ID.match(page_id)
        if m is None:
            raise SystemExit(f"unexpected page id {page_id!r} in {src}")
        raw = (src / "html" / f"{page_id}.html.gz").read_bytes()
        url = canonical_url(gzip.decompress(raw))
        canonical += url is not None
        name = f"pages/{page_id}.html.gz"
        (out / name).write_bytes(raw)
        entries.append({"url": url or f"https://{m['name']}.readability-test.example/",
                        "path": name, "content_type": "text/html"})
    if len({e["url"] for e in entries}) != len(entries):
        raise SystemExit("two pages share a URL; give one of them its .example address")
    write_manifest(out, entries)
    shutil.copyfile(src / "LICENSE", out / "LICENSE")
    (out / "README.md").write_text(README.format(total=len(entries), canonical=canonical), encoding="utf-8")

"""The last word on links in a report, after the last review round: only pages this run fetched stay linked.

The reviewer flags an unfetched URL and the writer is asked to remove it, but a writer that does not (or a page that
talked it into an image whose URL carries data out) must not leave it in the Markdown every export holds: the
RunResult, the download and the saved runs, which any Markdown viewer renders. So, in the report body:
- an image goes, its alt text kept: a report has no images, and a viewer would load one unasked;
- a link to a URL that was not fetched keeps its text and loses its target; its reference definition goes;
- a bare or angle-bracketed URL that was not fetched is defanged (hxxps://host[.]tld/...), so no viewer links it;
- raw HTML is escaped, so no tag (an <img>, an <a>) reaches a viewer.
URLs of the question itself (and of its gaps) may be repeated: restating what was asked is not a claim.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from pipeline.core.urls import url_key

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)|!\[([^\]]*)\]\[[^\]]*\]")
_LINK = re.compile(r"(?<![!\\])\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?.*(?:\n|$)", re.M)
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^>\s]+)>", re.I)
# Whatever GFM autolinks: a scheme or "www." after any non-alphanumeric (an underscore too).
_BARE = re.compile(r"(?<![A-Za-z0-9])((?:(?:https?|ftp)://|www\.)[^\s)\]>\"'<]+)", re.I)
_HTML = re.compile(r"<(?=[A-Za-z/!?])")
_KEPT = "\x00{}\x00"  # a kept link, set aside while bare URLs are defanged


def _key(url: str) -> str:
    return url_key(url.strip().rstrip(".,;:!?"))


def defanged_url(url: str) -> str:
    """The URL as text no Markdown viewer links: hxxps://example[.]com/path."""
    scheme, sep, rest = url.partition("://") if "://" in url else ("", "", url)  # "www.host/path"
    host, slash, path = rest.partition("/")
    return f"{scheme.lower().replace('t', 'x', 2)}{sep}{host.replace('.', '[.]')}{slash}{path}"


def defang(body: str, allowed: Iterable[str]) -> str:
    """`body` with every image removed, and every link or URL whose target is not in `allowed` (URLs, any
    spelling url_key equates) unlinked or defanged; raw HTML escaped."""
    ok = {_key(u) for u in allowed if u}

    def fine(url: str) -> bool:
        return _key(url) in ok

    body = _IMAGE.sub(lambda m: f"{(m.group(1) or m.group(3) or 'image').strip()} (image removed)", body)
    body = _REF_DEF.sub(lambda m: m.group(0) if fine(m.group(1)) else "", body)
    kept: list[str] = []

    def keep(text: str) -> str:
        kept.append(text)
        return _KEPT.format(len(kept) - 1)

    body = _LINK.sub(lambda m: keep(m.group(0).replace(m.group(1), _HTML.sub("&lt;", m.group(1)), 1))
                     if fine(m.group(2)) else m.group(1), body)
    body = _AUTOLINK.sub(lambda m: keep(m.group(0)) if fine(m.group(1)) else defanged_url(m.group(1)), body)
    body = _HTML.sub("&lt;", body)
    body = _BARE.sub(_bare(fine), body)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], body)


def defang_bare(text: str, allowed: Iterable[str]) -> str:
    """`text` with every bare URL not in `allowed` defanged: for quoted page text, which Markdown viewers autolink."""
    ok = {_key(u) for u in allowed if u}
    return _BARE.sub(_bare(lambda url: _key(url) in ok), text)


def _bare(fine: Callable[[str], bool]) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        url = m.group(1)
        trail = url[len(url.rstrip(".,;:!?")):]
        url = url[: len(url) - len(trail)] if trail else url
        return (url if fine(url) else defanged_url(url)) + trail
    return sub

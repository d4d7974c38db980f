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

# The patterns below are linear: the former ones read on from every start of a run of near-matches. Runs up to a
# closing bracket are taken whole (`*+`, `++`): they cannot hold it, so giving back is never needed. A group "open"
# is a start that fails, left as it is, matched up to the "]" where it failed: each start inside it would reach that
# "]" and fail there too, so the search goes on after it instead of from each of them.
# An image: ![alt](url) (group "close" missing: no ")" follows, see _without_images) or ![alt][ref].
_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*+)\]\((?P<url>[^)]*+)(?P<close>\))?|!\[(?P<ref_alt>[^\]]*+)\]\[[^\]]*+\]"
                    r"|(?P<open>!\[[^\]]*+)")
_IMAGE_BY_REFERENCE = re.compile(r"!\[(?P<ref_alt>[^\]]*+)\]\[[^\]]*+\]|(?P<open>!\[[^\]]*+)")  # once no ")" follows
# A link, [text](url "title"), read in parts by _links(): its "[text](" (no "(": an "open" start), the url's run
# (which ends at a space, ")" or ">") and what may follow the url. Each url run is read once however many links
# start inside it ("[a](a[a](a..."), and what follows it once.
_LINK_HEAD = re.compile(r"(?<![!\\])\[(?:(?P<text>[^\]]++)\]\(|(?P<open>[^\]]*+))")
_LINK_URL_RUN = re.compile(r"[^)\s>]*+")
_LINK_TAIL = re.compile(r""">?(?:\s++(?:"[^"]*+"|'[^']*+'))?\s*+\)""")
_SPACES = re.compile(r"\s*+")
_REF_DEF = re.compile(r"^ {0,3}\[(?:[^\]]++\]:[ \t]*+<?([^\s>]++)>?.*(?:\n|$)|(?P<open>[^\]]*+))", re.M)
# Group "open": as in _IMAGE, a "<https://..." that does not close, left as it is.
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^>\s]++)>|(?P<open><(?:https?|ftp)://[^>\s]*+)", re.I)
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

    body = _without_images(body)
    body = _REF_DEF.sub(lambda m: m.group(0) if m.group("open") is not None or fine(m.group(1)) else "", body)
    kept: list[str] = []

    def keep(text: str) -> str:
        kept.append(text)
        return _KEPT.format(len(kept) - 1)

    body = _links(body, lambda whole, text, url: keep(whole.replace(text, _HTML.sub("&lt;", text), 1))
                  if fine(url) else text)
    body = _AUTOLINK.sub(lambda m: m.group() if m.group("open") is not None
                         else keep(m.group(0)) if fine(m.group(1)) else defanged_url(m.group(1)), body)
    body = _HTML.sub("&lt;", body)
    body = _BARE.sub(_bare(fine), body)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], body)


def _without_images(body: str) -> str:
    """`body` with each image replaced by its alt text and "(image removed)"."""
    def replace(m: re.Match[str]) -> str:
        if m.group("open") is not None:
            return m.group()
        if m.groupdict().get("url") is not None and m.group("close") is None:
            # "![alt](" with no ")" after it: not an image, and no later "![...](" is one. It was matched to the end
            # of the text: the rest is read again from its "]" (starts before it fail there too), for ![alt][ref].
            end = m.end("alt")
            return m.string[m.start():end] + _IMAGE_BY_REFERENCE.sub(replace, m.string[end:])
        return f"{(m.groupdict().get('alt') or m.group('ref_alt') or 'image').strip()} (image removed)"
    return _IMAGE.sub(replace, body)


def _links(body: str, replace: Callable[[str, str, str], str]) -> str:
    """`body` with each Markdown inline link, [text](url) or [text](<url> "title") (not after "!" or a backslash),
    replaced by replace(link, text, url): the links the former single pattern found, in linear time."""
    out: list[str] = []
    done = at = 0  # body[:done] is in `out`; the next link starts at `at` or later
    run = (0, 0)  # the last url run read: from, to
    tails: dict[int, int | None] = {}  # the end of what follows a url run ending there (None: no link)
    while (head := _LINK_HEAD.search(body, at)) is not None:
        at = head.end()
        if head.group("open") is not None:
            continue  # no "](" after its text: a start inside it fails at the same "]"
        start = _SPACES.match(body, at).end()  # type: ignore[union-attr]  # always matches
        if not run[0] <= start < run[1]:
            run = (start, _LINK_URL_RUN.match(body, start).end())  # type: ignore[union-attr]  # always matches
        end = run[1]
        if end not in tails:
            tail = _LINK_TAIL.match(body, end)
            tails[end] = tail.end() if tail else None
        stop = tails[end]
        if end == start or stop is None:
            at = head.end("text")  # fails at its "]", as does a start inside its text
            continue
        # "<" is taken as the url's opening bracket if a url follows it, else as the url. (Cut only now: the run may
        # be long, and shared by every link that starts in it.)
        url = body[start + 1:end] if body.startswith("<", start) and end > start + 1 else body[start:end]
        out += [body[done:head.start()], replace(body[head.start():stop], head.group("text"), url)]
        done = at = stop
    return "".join(out) + body[done:]


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

"""Safe HTML for a report: untrusted Markdown rendered inert, [F#] citations that open their quote, text-fragment links.

Model output and page text are untrusted. Every character of them is HTML-escaped; the only tags in the output are
the ones built here, and the only links point at sources the run fetched (http/https, taken from the RunResult's
sources, never from the model's text). Images, raw HTML, autolinks and other links are shown as plain text.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from pipeline.core.ids import CITATION, CITED_ID, CITED_IDS, gap_id
from pipeline.core.schema import Calculation, Finding, RunResult, Source
from pipeline.core.urls import url_key
from pipeline.research.steps.checks import body_of

_PUA = 0xE000  # backslash-escaped punctuation is parked here while emphasis is parsed, so "\*" stays literal
_PUA_RE = re.compile("[\ue000-\ue07f]")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
# Whole runs of backticks open and close a code span: a run that could shrink backtracks cubically on a long one.
_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_TOKENS = re.compile(
    r"(?P<link>!?\[(?P<text>[^\[\]\n]*)\]\((?P<href>[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"\n]*\")?\))"
    rf"|(?P<cite>\[(?P<ids>{CITED_IDS})\])"
    r"|(?P<url>https?://[^\s<>\"'\])]+)",
    re.I,
)
# A span never runs past the next opening delimiter (nor a link text past the next "["): otherwise every unclosed
# opener scans to the end of the text, and rendering is quadratic in it.
_STRONG = re.compile(r"\*\*(?=\S)((?:(?!\*\*).)+?)(?<=\S)\*\*|(?<![\w_])__(?=\S)((?:(?!__).)+?)(?<=\S)__(?![\w_])")
_EM = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])"
                 r"|(?<![\w_])_(?=\S)((?:[^_]|(?<=\w)_(?=\w))+?)(?<=\S)_(?![\w_])")
# The closing #s are cut by _heading_text: a pattern for them backtracks cubically on a long run of spaces.
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# Bidirectional controls can make escaped text display in another order than it reads (e.g. a reversed address).
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BULLET = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])\s+(.*)$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_FRAGMENT_WORDS = 5  # a long quote becomes textStart,textEnd: fewer characters to match exactly


@dataclass
class Evidence:
    """What a report's citations may open: findings, sources, gaps and calculations of one run, by id."""

    findings: dict[str, Finding] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)
    calculations: dict[str, Calculation] = field(default_factory=dict)
    _by_url: dict[str, Source] = field(default_factory=dict)

    @classmethod
    def of(cls, rr: RunResult) -> Evidence:
        ev = cls(findings={f.id: f for f in rr.findings}, sources={s.id: s for s in rr.sources},
                 gaps={gap_id(i): g for i, g in enumerate(rr.report.gaps, 1)},
                 calculations={c.id: c for c in rr.calculations})
        for s in rr.sources:
            for u in (s.url, s.final_url):
                if safe_href(u):
                    ev._by_url.setdefault(url_key(u), s)
        return ev

    def fetched(self, url: str) -> Source | None:
        """The fetched source at `url` (compared normalised), or None: only these may become links."""
        return self._by_url.get(url_key(url))


def safe_href(url: str | None) -> str | None:
    """`url` if it is an absolute http(s) URL without credentials, spaces or control characters, else None."""
    if not url or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return None
    return url


def text_fragment_url(url: str, quote_text: str) -> str:
    """`url` with a text fragment (#:~:text=) that makes the browser scroll to and highlight `quote_text`."""
    words = quote_text.split()
    if not words:
        return url
    strip = "\"'“”‘’«»()[]"
    if len(words) > 2 * _FRAGMENT_WORDS:
        start = " ".join(words[:_FRAGMENT_WORDS]).lstrip(strip)
        end = " ".join(words[-_FRAGMENT_WORDS:]).rstrip(strip)
        directive = f"{_fragment_part(start)},{_fragment_part(end)}"
    else:
        directive = _fragment_part(" ".join(words).strip(strip))
    base, _, fragment = url.partition("#")
    fragment = fragment.split(":~:", 1)[0]
    return f"{base}#{fragment}:~:text={directive}"


def _fragment_part(text: str) -> str:
    # The directive's own syntax uses "-", "," and "&", so they must be percent-encoded too.
    return quote(text, safe="").replace("-", "%2D")


def _esc(text: str) -> str:
    return html.escape(strip_bidi(text), quote=True)


def strip_bidi(text: str) -> str:
    """`text` without Unicode bidirectional controls, so untrusted text shows in the order it is stored."""
    return _BIDI.sub("", text)


def _heading_text(text: str) -> str:
    """A heading's text without its closing run of #s (which counts only after a space, or as the whole text)."""
    text = text.rstrip()
    bare = text.rstrip("#")
    return bare.rstrip() if not bare or bare[-1].isspace() else text


class _Inline:
    """Renders one line of untrusted Markdown text to HTML with citations resolved against the run's evidence."""

    def __init__(self, evidence: Evidence, cards: bool):
        self.ev = evidence
        self.cards = cards

    def render(self, text: str) -> str:
        text = _PUA_RE.sub("\ufffd", text)
        out, pos = [], 0
        for m in _CODE.finditer(text):
            out.append(self._spans(text[pos:m.start()]))
            out.append(f"<code>{_esc(m.group(2).strip())}</code>")
            pos = m.end()
        out.append(self._spans(text[pos:]))
        return "".join(out)

    def _spans(self, text: str) -> str:
        text = _ESCAPED.sub(lambda m: chr(_PUA + ord(m.group(1))), text)
        out, pos = [], 0
        for m in _TOKENS.finditer(text):
            out.append(_plain(text[pos:m.start()]))
            out.append(self._token(m))
            pos = m.end()
        out.append(_plain(text[pos:]))
        return "".join(out)

    def _token(self, m: re.Match[str]) -> str:
        if m.group("cite"):
            return "".join(self.cite(i) for i in CITED_ID.findall(m.group("ids")))
        raw = m.group(0)
        href = _unpark(m.group("href") if m.group("link") else raw)
        src = self.ev.fetched(href) if not raw.startswith("!") else None
        target = safe_href(src.final_url) if src is not None else None  # a fetched url may end elsewhere
        if target is None:  # images, unfetched addresses, javascript: and friends are shown as the text they are
            return _plain(raw)
        label = _plain(m.group("text")) if m.group("link") else _esc(_unpark(raw))
        return _link(target, label or _esc(target))

    def cite(self, cid: str) -> str:
        """One citation chip; with cards, focusing it (click or tab) shows what it cites."""
        chip = f"[{_esc(cid)}]"
        if not self.cards:
            return f'<span class="vb-cite-plain">{chip}</span>'
        card, kind = self._card(cid)
        return (f'<span class="vb-cite vb-{kind}" tabindex="0" role="button" data-cite="{_esc(cid)}">{chip}'
                f'<span class="vb-card" role="note">{card}</span></span>')

    def _card(self, cid: str) -> tuple[str, str]:
        if (f := self.ev.findings.get(cid)) is not None:
            return finding_card(f, self.ev.sources.get(f.source)), "finding"
        if (gap := self.ev.gaps.get(cid)) is not None:
            return (f'<span class="vb-meta">Gap {_esc(cid)}: not established by any fetched source</span>'
                    f'<span class="vb-gap">{_esc(gap)}</span>'), "gap"
        if (c := self.ev.calculations.get(cid)) is not None:
            return (f'<span class="vb-meta">Calculation {_esc(cid)}, done in code</span>'
                    f'<span class="vb-calc"><code>{_esc(c.expression)} = {_esc(c.result)}</code></span>'), "calc"
        return f'<span class="vb-meta">{_esc(cid)} does not match anything this run recorded.</span>', "unknown"


def finding_card(f: Finding, src: Source | None) -> str:
    """The quote of a finding, its source title and date, and a link that opens the source at the quote."""
    title = (src.title if src else None) or "Untitled source"
    date = (src.published if src else None) or "undated"
    parts = [f'<span class="vb-quote">“{_esc(f.quote)}”</span>',
             f'<span class="vb-meta"><span class="vb-title">{_esc(title)}</span> · {_esc(date)} · '
             f'support {_esc(f.support)}, confidence {_esc(f.confidence)}</span>']
    if src is not None and safe_href(src.final_url):
        parts.append(_link(text_fragment_url(src.final_url, f.quote), "Open the source at this passage ↗",
                           cls="vb-open"))
    else:
        parts.append('<span class="vb-meta">No link: the source address is not a web page.</span>')
    return "".join(parts)


def _link(url: str, label_html: str, cls: str = "vb-link") -> str:
    return (f'<a class="{cls}" href="{_esc(url)}" target="_blank" rel="noopener noreferrer nofollow" '
            f'referrerpolicy="no-referrer">{label_html}</a>')


def _unpark(text: str) -> str:
    return _PUA_RE.sub(lambda m: chr(ord(m.group(0)) - _PUA), text)


def _plain(text: str) -> str:
    """Escaped text with **strong**, *em* and _em_; parked escapes come back as literal characters."""
    out = _esc(text)
    out = _STRONG.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", out)
    out = _EM.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", out)
    return _PUA_RE.sub(lambda m: _esc(chr(ord(m.group(0)) - _PUA)), out)


def markdown_html(markdown: str, evidence: Evidence, *, cards: bool = True) -> str:
    """A restricted Markdown subset (headings, paragraphs, lists, quotes, tables, rules, code) as inert HTML."""
    inline = _Inline(evidence, cards)
    out: list[str] = []
    para: list[str] = []
    lists: list[tuple[int, str]] = []  # open lists: (indent, "ul"|"ol")
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")

    def flush() -> None:
        if para:
            out.append(f"<p>{inline.render(' '.join(para))}</p>")
            para.clear()

    def close_lists(indent: int = -1) -> None:
        while lists and lists[-1][0] > indent:
            out.append(f"</li></{lists.pop()[1]}>")

    def end_block() -> None:
        flush()
        close_lists()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            end_block()
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines))
            out.append(f"<pre><code>{_esc(chr(10).join(lines[i + 1:end]))}</code></pre>")
            i = end + 1
            continue
        if not stripped:
            flush()
            i += 1
            continue
        if (h := _HEADING.match(stripped)) is not None:
            end_block()
            level = min(6, len(h.group(1)) + 1)  # the page has its own h1
            out.append(f"<h{level}>{inline.render(_heading_text(h.group(2)))}</h{level}>")
        elif _RULE.match(stripped):
            end_block()
            out.append("<hr>")
        elif stripped.startswith("|") and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            end_block()
            end = next((j for j in range(i + 2, len(lines)) if not lines[j].strip().startswith("|")), len(lines))
            out.append(_table(lines[i], lines[i + 2:end], inline))
            i = end
            continue
        elif stripped.startswith(">"):
            end_block()
            quoted = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                quoted.append(lines[i].strip()[1:].strip())
                i += 1
            out.append(f"<blockquote>{inline.render(' '.join(quoted))}</blockquote>")
            continue
        elif (b := _BULLET.match(line)) is not None:
            flush()
            indent, kind = len(b.group(1).expandtabs(4)), "ol" if b.group(2)[0].isdigit() else "ul"
            close_lists(indent)
            if lists and lists[-1][0] == indent and lists[-1][1] != kind:
                close_lists(indent - 1)
            if not lists or lists[-1][0] < indent:
                out.append(f"<{kind}><li>")
                lists.append((indent, kind))
            else:
                out.append("</li><li>")
            out.append(inline.render(b.group(3)))
        elif lists and line[:1].isspace():  # a continuation line of the current list item
            out.append(" " + inline.render(stripped))
        else:
            close_lists()
            para.append(stripped)
        i += 1
    end_block()
    return "\n".join(out)


def _table(header: str, rows: list[str], inline: _Inline) -> str:
    def cells(line: str) -> list[str]:
        return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]

    head = "".join(f"<th>{inline.render(c)}</th>" for c in cells(header))
    body = "".join("<tr>" + "".join(f"<td>{inline.render(c)}</td>" for c in cells(r)) + "</tr>" for r in rows)
    return f'<table class="vb-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def cited_findings(rr: RunResult) -> list[Finding]:
    """Findings the report body cites, in order of first citation."""
    findings = {f.id: f for f in rr.findings}
    seen: dict[str, None] = {}
    for group in CITATION.findall(body_of(rr.report.markdown)):
        for fid in CITED_ID.findall(group):
            if fid in findings:
                seen.setdefault(fid, None)
    return [findings[i] for i in seen]


def sources_html(rr: RunResult, evidence: Evidence | None = None) -> str:
    """The Sources section from the run's data (never from the model's text): one entry per cited finding."""
    ev = evidence or Evidence.of(rr)
    items = []
    for f in cited_findings(rr):
        src = ev.sources.get(f.source)
        title = _esc((src.title if src else None) or "Untitled source")
        if src is not None and safe_href(src.final_url):
            title = _link(text_fragment_url(src.final_url, f.quote), title)
            where = f'<span class="vb-url">{_esc(src.final_url)}</span>'
        else:
            where = '<span class="vb-url">address not recorded</span>'
        date = _esc((src.published if src else None) or "undated")
        items.append(f'<li id="vb-src-{_esc(f.id)}"><span class="vb-fid">[{_esc(f.id)}]</span> {title} · {date}<br>'
                     f'{where}<blockquote class="vb-src-quote">“{_esc(f.quote)}”</blockquote></li>')
    body = "".join(items) or "<li>No finding was cited.</li>"
    return f'<h3>Sources</h3><ol class="vb-sources">{body}</ol>'


def report_title(rr: RunResult) -> str:
    """The report's title as plain text (its first line when that is a heading), else the question."""
    first = next((ln.strip() for ln in rr.report.markdown.splitlines() if ln.strip()), "")
    m = _HEADING.match(first)
    title = _ESCAPED.sub(r"\1", _heading_text(m.group(2))) if m else ""
    return " ".join(title.split()) or rr.question


def report_html(rr: RunResult, *, title: bool = True) -> str:
    """The whole report as one inert HTML fragment: styles, the body with citation cards, and the Sources list;
    title=False leaves out a leading heading (the page shows it)."""
    ev = Evidence.of(rr)
    body = body_of(rr.report.markdown)
    if not title:
        lines = body.lstrip().split("\n")
        if lines and _HEADING.match(lines[0].strip()):
            body = "\n".join(lines[1:])
    return (f"<style>{STYLE}</style><div class=\"vb-report\">{markdown_html(body, ev)}"
            f"{sources_html(rr, ev)}</div>")


STYLE = """
.vb-report{line-height:1.6;font-size:1rem;overflow-wrap:anywhere}
.vb-report h2{font-size:1.6rem;margin:.2rem 0 .6rem}.vb-report h3{font-size:1.25rem;margin:1.2rem 0 .4rem}
.vb-report h4,.vb-report h5,.vb-report h6{font-size:1.05rem;margin:1rem 0 .3rem}
.vb-report blockquote{border-left:3px solid #c9cdd4;margin:.5rem 0;padding:.1rem .8rem;color:#3d4450}
.vb-report code{font-size:.9em;background:rgba(127,127,127,.12);padding:0 .25em;border-radius:3px}
.vb-table{border-collapse:collapse;margin:.6rem 0}
.vb-table th,.vb-table td{border:1px solid #d6d9de;padding:.3rem .6rem;vertical-align:top}
.vb-report{position:relative}
.vb-cite{position:static;display:inline;cursor:pointer;color:#1a5fb4;font-weight:600;font-size:.85em;
white-space:nowrap;border-radius:3px;padding:0 .1em;outline-offset:1px}
.vb-cite:hover,.vb-cite:focus{background:#e3edfb}.vb-cite.vb-unknown{color:#b42318}.vb-cite.vb-gap{color:#8a5a00}
.vb-card{display:none;position:absolute;left:0;margin-top:.3em;z-index:1000;width:min(36rem,100%);white-space:normal;
background:#fff;color:#1f2328;border:1px solid #c9cdd4;border-radius:6px;box-shadow:0 6px 24px rgba(0,0,0,.18);
padding:.7rem .85rem;font-weight:400;font-size:.95rem;line-height:1.45;cursor:auto;text-align:left}
.vb-cite:focus .vb-card,.vb-cite:focus-within .vb-card{display:block}
.vb-card>span,.vb-card>a{display:block;margin:.15rem 0}
.vb-quote{font-style:italic;border-left:3px solid #1a5fb4;padding-left:.6rem;margin-bottom:.4rem!important}
.vb-meta{color:#57606a;font-size:.85rem}.vb-title{font-weight:600;color:#1f2328}
.vb-open{font-size:.9rem}
.vb-sources{padding-left:1.4rem}.vb-sources li{margin:.5rem 0}.vb-fid{font-weight:600;color:#1a5fb4}
.vb-url{color:#57606a;font-size:.8rem}.vb-src-quote{font-style:italic}
.vb-report{max-width:56rem}.vb-notes li{margin:.3rem 0}
.vb-kind{font-family:monospace;font-size:.85em;background:#fff4e5;color:#8a5a00;padding:0 .3em;border-radius:3px}
"""


def notes_html(rr: RunResult) -> str:
    """Gaps, conflicts (with their findings' citation cards) and the problems left, as inert HTML; "" if none."""
    ev = Evidence.of(rr)
    inline = _Inline(ev, cards=True)
    parts = []
    if rr.report.gaps:
        items = "".join(f"<li>{inline.cite(gid)} {_esc(g)}</li>" for gid, g in ev.gaps.items())
        parts.append(f'<h4>Not established</h4><ul class="vb-notes">{items}</ul>')
    if rr.report.conflicts:
        items = "".join(f"<li>{_esc(c.description)} {''.join(inline.cite(i) for i in c.findings)}</li>"
                        for c in rr.report.conflicts)
        parts.append(f'<h4>Sources disagree</h4><ul class="vb-notes">{items}</ul>')
    if rr.problems:
        items = "".join(
            f'<li><span class="vb-kind">{_esc(p.kind)}</span> {_esc(p.message)}'
            + (f'<br><span class="vb-meta">in: “{_esc(p.sentence)}”</span>' if p.sentence else "") + "</li>"
            for p in rr.problems)
        parts.append(f'<h4>Problems left</h4><ul class="vb-notes vb-problems">{items}</ul>')
    if not parts:
        return ""
    return f"<style>{STYLE}</style><div class=\"vb-report\">{''.join(parts)}</div>"

"""Safe HTML for a report: untrusted Markdown rendered inert, [F#] citations that open their quote, text-fragment links.

Model output and page text are untrusted. markdown-it-py parses the Markdown (CommonMark and tables; raw HTML,
autolinks and reference definitions off) and the rules here write every tag: every character of untrusted text is
HTML-escaped, no attribute comes from the Markdown, and the only links point at sources the run fetched (http/https,
taken from the RunResult's sources, never from the model's text). Images and other links are shown as written.
"""
from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline.image import image as image_rule
from markdown_it.rules_inline.link import link as link_rule
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from pipeline.core.ids import CITATION, CITED_ID, CITED_IDS, gap_id
from pipeline.core.location import cite
from pipeline.core.schema import Calculation, Finding, RunResult, Source
from pipeline.core.urls import url_key
from pipeline.research.steps.checks import body_of

# Bidirectional controls can make escaped text display in another order than it reads (e.g. a reversed address).
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_URL = re.compile(r"https?://[^\s<>\"'\])]+", re.I)
_CITE = re.compile(rf"\[({CITED_IDS})\]")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_FRAGMENT_WORDS = 5  # a long quote becomes textStart,textEnd: fewer characters to match exactly


@dataclass
class Evidence:
    """What a report's citations may open: findings, sources, gaps and calculations of one run, by id."""

    findings: dict[str, Finding] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)
    calculations: dict[str, Calculation] = field(default_factory=dict)
    run_id: str = ""
    _by_url: dict[str, Source] = field(default_factory=dict)

    @classmethod
    def of(cls, rr: RunResult) -> Evidence:
        ev = cls(findings={f.id: f for f in rr.findings}, sources={s.id: s for s in rr.sources},
                 gaps={gap_id(i): g for i, g in enumerate(rr.report.gaps, 1)},
                 calculations={c.id: c for c in rr.calculations}, run_id=rr.run_id)
        for s in rr.sources:
            for u in (s.url, s.final_url):
                if safe_href(u):
                    ev._by_url.setdefault(url_key(u), s)
        return ev

    def fetched(self, url: str) -> Source | None:
        """The fetched source at `url` (compared normalised), or None: only these may become links."""
        return self._by_url.get(url_key(url))

    def link_to(self, url: str) -> str | None:
        """Where a link the report makes to `url` goes: the final address of the fetched source at it, else None."""
        src = self.fetched(url)
        return safe_href(src.final_url) if src is not None else None  # a fetched url may end elsewhere


def safe_href(url: str | None) -> str | None:
    """`url` if it is an absolute http(s) URL without credentials, spaces or control characters, else None."""
    if not url or _CONTROL.search(url):
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


def esc(text: str) -> str:
    return html.escape(strip_bidi(text), quote=True)


def strip_bidi(text: str) -> str:
    """`text` without Unicode bidirectional controls, so untrusted text shows in the order it is stored."""
    return _BIDI.sub("", text)


class _Citations:
    """Citation chips resolved against the run's evidence; with cards, each opens what it cites."""

    def __init__(self, evidence: Evidence, cards: bool):
        self.ev = evidence
        self.cards = cards

    def cite(self, cid: str) -> str:
        """One citation chip; with cards, focusing it (click or tab) shows what it cites."""
        chip = f"[{esc(cid)}]"
        if not self.cards:
            return f'<span class="vb-cite-plain">{chip}</span>'
        card, kind = self._card(cid)
        return (f'<span class="vb-cite vb-{kind}" tabindex="0" role="button" data-cite="{esc(cid)}">{chip}'
                f'<span class="vb-card" role="note">{card}</span></span>')

    def _card(self, cid: str) -> tuple[str, str]:
        if (f := self.ev.findings.get(cid)) is not None:
            return finding_card(f, self.ev.sources.get(f.source), self.ev.run_id), "finding"
        if (gap := self.ev.gaps.get(cid)) is not None:
            return (f'<span class="vb-meta">Gap {esc(cid)}: not established by any fetched source</span>'
                    f'<span class="vb-gap">{esc(gap)}</span>'), "gap"
        if (c := self.ev.calculations.get(cid)) is not None:
            return (f'<span class="vb-meta">Calculation {esc(cid)}, done in code</span>'
                    f'<span class="vb-calc"><code>{esc(c.expression)} = {esc(c.result)}</code></span>'), "calc"
        return f'<span class="vb-meta">{esc(cid)} does not match anything this run recorded.</span>', "unknown"


def passage_path(run_id: str, finding_id: str) -> str:
    """The app's own link to a finding's passage in the text the run read (documents are never served raw)."""
    return f"/report?run={quote(run_id, safe='')}&passage={quote(finding_id, safe='')}"


def document_place(f: Finding, src: Source) -> str:
    """Where a document's quote is, for a reader: "document reports/a.pdf, p. 14"."""
    return ", ".join(p for p in (f"document {src.path or src.title or ''}".strip(), cite(f.location)) if p)


def finding_card(f: Finding, src: Source | None, run_id: str = "") -> str:
    """The quote of a finding, its source title and date, and a link that opens the source at the quote (a document:
    the app's view of its text, at the quote)."""
    title = (src.title if src else None) or "Untitled source"
    date = (src.published if src else None) or "undated"
    parts = [f'<span class="vb-quote">“{esc(f.quote)}”</span>',
             f'<span class="vb-meta"><span class="vb-title">{esc(title)}</span> · {esc(date)} · '
             f'support {esc(f.support)}, confidence {esc(f.confidence)}</span>']
    if src is not None and src.kind == "document":
        parts.append(f'<span class="vb-meta">{esc(document_place(f, src))}</span>')
        if run_id:
            parts.append(_link(passage_path(run_id, f.id), "Open the passage in the document's text ↗",
                               cls="vb-open"))
    elif src is not None and safe_href(src.final_url):
        parts.append(_link(text_fragment_url(src.final_url, f.quote), "Open the source at this passage ↗",
                           cls="vb-open"))
    else:
        parts.append('<span class="vb-meta">No link: the source address is not a web page.</span>')
    return "".join(parts)


def _link(url: str, label_html: str, cls: str = "vb-link") -> str:
    return f"{_a(url, cls)}{label_html}</a>"


def _a(url: str, cls: str = "vb-link") -> str:
    return (f'<a class="{cls}" href="{esc(url)}" target="_blank" rel="noopener noreferrer nofollow" '
            'referrerpolicy="no-referrer">')


def _keep_source(rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    """`rule` (link or image) also keeping the Markdown it parsed, which is shown when no link is made of it."""
    def parse(state: StateInline, silent: bool) -> bool:
        start, first = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            made = state.tokens[first:]
            if made[-1].type == "image":
                made[-1].meta["source"] = state.src[start:state.pos]
            else:  # link_open ... link_close share their address and what follows the label, "](address)"
                label_end = state.md.helpers.parseLinkLabel(state, start, True)
                opener = next(t for t in made if t.type == "link_open")
                opener.meta.update(href=opener.attrGet("href"), tail=state.src[label_end:state.pos])
                made[-1].meta = opener.meta
        return True
    return parse


def _citation(state: StateInline, silent: bool) -> bool:
    m = _CITE.match(state.src, state.pos, state.posMax) if state.src[state.pos] == "[" else None
    if m is None:
        return False
    if not silent:
        state.push("vb_cite", "", 0).content = m.group(1)
    state.pos = m.end()
    return True


class _Renderer(RendererHTML):
    """Markdown tokens to HTML: only the tags of _TAGS and of the rules here, and no attribute from the Markdown."""

    def renderToken(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        # A parser rule enabled later without a renderer here must not bring its own tags.
        return super().renderToken(tokens, idx, options, env) if tokens[idx].tag in _TAGS else ""

    @staticmethod
    def renderAttrs(token: Token) -> str:
        return ""  # ordered-list starts, table alignments, code languages: every attribute comes from a rule here

    def table_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return '<table class="vb-table">\n'

    def text(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        text = tokens[idx].content
        if env["in_link"]:
            return esc(text)
        out, pos = [], 0
        for m in _URL.finditer(text):  # bare addresses of fetched sources become links
            if (target := env["ev"].link_to(m.group(0))) is not None:
                out += [esc(text[pos:m.start()]), _link(target, esc(m.group(0)))]
                pos = m.end()
        return "".join(out) + esc(text[pos:])

    def code_inline(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return f"<code>{esc(tokens[idx].content)}</code>"

    def code_block(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        code = tokens[idx].content.removesuffix("\n")
        return f"<pre><code>{esc(code)}</code></pre>\n"

    fence = code_block  # the info string is dropped: no language class

    def html_block(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return esc(tokens[idx].content)  # raw HTML is off in the parser; were it on, it would still be text

    html_inline = html_block

    def image(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return esc(tokens[idx].meta["source"])  # never an <img>: the Markdown as written

    def link_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        if (target := env["ev"].link_to(tokens[idx].meta["href"])) is None:
            return "["
        env["in_link"] = True
        return _a(target) + (esc(target) if tokens[idx + 1].type == "link_close" else "")

    def link_close(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        if env["ev"].link_to(tokens[idx].meta["href"]) is None:
            return esc(tokens[idx].meta["tail"])
        env["in_link"] = False
        return "</a>"

    def vb_cite(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return "".join(env["cites"].cite(i) for i in CITED_ID.findall(tokens[idx].content))


_TAGS = {"p", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li", "hr", "table", "thead", "tbody", "tr", "th",
         "td", "em", "strong", "br"}
# Raw HTML, autolinks and reference definitions off: <...> is text, and a link's address is always in the link.
_MD = (MarkdownIt("commonmark", {"html": False, "xhtmlOut": False}, renderer_cls=_Renderer)
       .disable(["html_block", "html_inline", "autolink", "reference"]).enable("table"))
_MD.inline.ruler.at("link", _keep_source(link_rule))
_MD.inline.ruler.at("image", _keep_source(image_rule))
_MD.inline.ruler.after("link", "vb_cite", _citation)


def _tokens(markdown: str, *, title: bool = True) -> list[Token]:
    """The parsed Markdown; title=False leaves out a leading heading."""
    tokens = _MD.parse(markdown)
    for t in tokens:
        if t.type in ("heading_open", "heading_close"):
            t.tag = f"h{min(6, int(t.tag[1]) + 1)}"  # the page has its own h1
    return tokens[3:] if not title and tokens and tokens[0].type == "heading_open" else tokens


def _render(tokens: list[Token], evidence: Evidence, cards: bool) -> str:
    env = {"ev": evidence, "cites": _Citations(evidence, cards), "in_link": False}
    return str(_MD.renderer.render(tokens, _MD.options, env)).rstrip("\n")


def markdown_html(markdown: str, evidence: Evidence, *, cards: bool = True) -> str:
    """CommonMark and tables (no raw HTML, images, autolinks) as inert HTML, with citations resolved by `evidence`."""
    return _render(_tokens(markdown), evidence, cards)


def _plain_text(tokens: list[Token]) -> str:
    """Inline tokens as the text they show, with links and images as written."""
    out = []
    for t in tokens:
        if t.type in ("text", "code_inline"):
            out.append(t.content)
        elif t.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif t.type == "vb_cite":
            out.append(f"[{t.content}]")
        elif t.type == "image":
            out.append(t.meta["source"])
        elif t.type == "link_open":
            out.append("[")
        elif t.type == "link_close":
            out.append(t.meta["tail"])
    return "".join(out)


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
        title = esc((src.title if src else None) or "Untitled source")
        if src is not None and src.kind == "document":
            if ev.run_id:
                title = _link(passage_path(ev.run_id, f.id), title)
            where = f'<span class="vb-url">{esc(document_place(f, src))}</span>'
        elif src is not None and safe_href(src.final_url):
            title = _link(text_fragment_url(src.final_url, f.quote), title)
            where = f'<span class="vb-url">{esc(src.final_url)}</span>'
        else:
            where = '<span class="vb-url">address not recorded</span>'
        date = esc((src.published if src else None) or "undated")
        items.append(f'<li id="vb-src-{esc(f.id)}"><span class="vb-fid">[{esc(f.id)}]</span> {title} · {date}<br>'
                     f'{where}<blockquote class="vb-src-quote">“{esc(f.quote)}”</blockquote></li>')
    body = "".join(items) or "<li>No finding was cited.</li>"
    return f'<h3>Sources</h3><ol class="vb-sources">{body}</ol>'


_LEADING_BLANKS = re.compile(r"\A(?:[ \t\r]*\n)+")
_FIRST_BLOCK = re.compile(r"\n[ \t\r]*\n")


def report_title(rr: RunResult) -> str:
    """The report's title as plain text (its first block when that is a heading), else the question."""
    # Only the first block can be the title, and it ends at the first blank line: parse no further.
    tokens = _MD.parse(_FIRST_BLOCK.split(_LEADING_BLANKS.sub("", rr.report.markdown), 1)[0])
    title = _plain_text(tokens[1].children or []) if tokens and tokens[0].type == "heading_open" else ""
    return " ".join(title.split()) or rr.question


def report_html(rr: RunResult, *, title: bool = True, evidence: Evidence | None = None) -> str:
    """The whole report as one inert HTML fragment: styles, the body with citation cards, and the Sources list;
    title=False leaves out a leading heading (the page shows it)."""
    ev = evidence or Evidence.of(rr)
    body = _render(_tokens(body_of(rr.report.markdown), title=title), ev, cards=True)
    return f"<style>{STYLE}</style><div class=\"vb-report\">{body}{sources_html(rr, ev)}</div>"


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


def notes_html(rr: RunResult, evidence: Evidence | None = None) -> str:
    """Gaps, conflicts (with their findings' citation cards) and the problems left, as inert HTML; "" if none."""
    ev = evidence or Evidence.of(rr)
    inline = _Citations(ev, cards=True)
    parts = []
    if rr.report.gaps:
        items = "".join(f"<li>{inline.cite(gid)} {esc(g)}</li>" for gid, g in ev.gaps.items())
        parts.append(f'<h4>Not established</h4><ul class="vb-notes">{items}</ul>')
    if rr.report.conflicts:
        items = "".join(f"<li>{esc(c.description)} {''.join(inline.cite(i) for i in c.findings)}</li>"
                        for c in rr.report.conflicts)
        parts.append(f'<h4>Sources disagree</h4><ul class="vb-notes">{items}</ul>')
    if rr.problems:
        items = "".join(
            f'<li><span class="vb-kind">{esc(p.kind)}</span> {esc(p.message)}'
            + (f'<br><span class="vb-meta">in: “{esc(p.sentence)}”</span>' if p.sentence else "") + "</li>"
            for p in rr.problems)
        parts.append(f'<h4>Problems left</h4><ul class="vb-notes vb-problems">{items}</ul>')
    if not parts:
        return ""
    return f"<style>{STYLE}</style><div class=\"vb-report\">{''.join(parts)}</div>"

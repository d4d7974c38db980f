"""The writer: a report body from verified findings only (lead model), and the Sources section built in code."""
from __future__ import annotations

import re

from pipeline.core.budget import Phase
from pipeline.core.ids import CITATION, FINDING_ID
from pipeline.core.location import cite
from pipeline.core.schema import Conflict, Finding, Problem
from pipeline.models.base import LLMError
from pipeline.research.context import RunContext
from pipeline.research.prompts import load
from pipeline.research.steps import tags
from pipeline.research.steps.checks import Evidence, body_of, is_label
from pipeline.research.steps.defang import defang_bare

NOT_RESEARCHED = "Not researched (the plan was capped): "
LABEL = ("_Machine-assisted research report: every sentence cites a verbatim quote from a fetched source; "
         "check the sources before relying on it._")
WRITER_MAX_TOKENS = 4000
_FENCE = re.compile(r"^```[\w-]*\n(.*)\n```$", re.S)
# Markdown that could turn untrusted text into a link, an image, an autolink, inline HTML or code.
_MD_ACTIVE = re.compile(r"([\\\[\]()!<>`*_])")
# Control characters (terminal escapes) and bidi overrides: never passed from a page into a report.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Not allowed raw in a URI, so encoding them keeps the address; with brackets encoded no "[..](..)" can form.
_URL_ESCAPES = {ch: f"%{ord(ch):02X}" for ch in '[]<>`"\\ {}|^'}
_AUTHORITY = re.compile(r"^[a-z][a-z0-9+.-]*://[^/?#\s<>`\"]*", re.I)


def label(evidence: Evidence | None = None) -> str:
    """The machine-assisted label; it also names every proxy the plan chose for a vague term, so the reader sees it."""
    if evidence is None or not evidence.proxies:
        return LABEL
    # Two sub-questions may share a proxy: each is named once (spacing and case aside), in the plan's order.
    seen: set[str] = set()
    proxies = []
    for proxy in (" ".join(p.split()) for p in evidence.proxies):
        if proxy.casefold() not in seen:
            seen.add(proxy.casefold())
            proxies.append(proxy)
    return LABEL[:-1] + " Vague terms were measured by proxies: " + "; ".join(inert(p) for p in proxies) + "._"


def usable_findings(evidence: Evidence) -> list[Finding]:
    """The findings the writer may use: all but those the support judge found unsupported."""
    return [f for f in evidence.findings if f.support != "unsupported"]


def writer_message(question: str, evidence: Evidence, conflicts: list[Conflict], *, draft: str | None = None,
                   problems: list[Problem] | None = None) -> str:
    """The writer's user message in the fixed tag format."""
    sources = {s.id: s for s in evidence.sources}
    parts = [f"<question>{tags.text(question)}</question>"]
    if evidence.proxies:
        parts += ["<proxies>", *(f"<proxy>{tags.text(p)}</proxy>" for p in evidence.proxies), "</proxies>"]
    parts.append("<findings>")
    for f in usable_findings(evidence):
        src = sources.get(f.source)
        attrs = {"id": f.id, "sub_question": f.sub_question or "", "source": f.source,
                 "title": (src.title if src else None) or "Untitled",
                 "published": (src.published if src else None) or "undated",
                 "confidence": f.confidence, "support": f.support}
        parts += [f"<finding {tags.attrs(attrs)}>", f"<claim>{tags.text(f.claim)}</claim>",
                  f"<quote>{tags.text(f.quote)}</quote>", "</finding>"]
    parts += ["</findings>", "<calculations>"]
    parts += [f"<calculation {tags.attrs({'id': c.id, 'expression': c.expression, 'result': c.result})}/>"
              for c in evidence.calculations]
    parts += ["</calculations>", "<gaps>"]
    parts += [f'<gap id="{gid}">{tags.text(gap)}</gap>'
              for gid, gap in zip(evidence.gap_ids(), evidence.gaps, strict=True)]
    parts += ["</gaps>", "<conflicts>"]
    parts += [f"<conflict {tags.attrs({'findings': ','.join(c.findings)})}>{tags.text(c.description)}</conflict>"
              for c in conflicts]
    parts.append("</conflicts>")
    if draft is not None:
        parts.append(f"<draft>{tags.text(draft)}</draft>")
        parts.append("<problems>")
        parts += [f"<problem {tags.attrs({'kind': p.kind, 'sentence': p.sentence or ''})}>"
                  f"{tags.text(p.message)}</problem>" for p in problems or []]
        parts.append("</problems>")
    return "\n".join(parts)


def write_report(question: str, evidence: Evidence, conflicts: list[Conflict], ctx: RunContext, *,
                 draft: str | None = None, problems: list[Problem] | None = None) -> str:
    """One lead-model call: the report body (title, label, text; no Sources section). Raises LLMError."""
    revision = draft is not None
    reply = ctx.llm.call(
        model=ctx.lead_model, system=load("writer"), max_tokens=WRITER_MAX_TOKENS, phase=Phase.SYNTHESIS,
        messages=[{"role": "user", "content": writer_message(question, evidence, conflicts, draft=draft,
                                                             problems=problems)}],
        purpose="writer:revision" if revision else "writer",
    )
    text = reply.text.strip()
    fenced = _FENCE.match(text)
    body = body_of(fenced.group(1) if fenced else text).strip()
    if not body:
        raise LLMError("malformed", "the writer returned an empty report")
    return with_label(body, question, evidence)


def with_label(body: str, question: str, evidence: Evidence | None = None) -> str:
    """`body` with a title first and exactly one machine-assisted label line right after it."""
    lines = [ln for ln in body.strip().splitlines() if not is_label(ln)]
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].lstrip().startswith("#"):
        title, rest = lines[0].strip(), lines[1:]
    else:
        title, rest = f"# {_one_line(question) or 'Research report'}", lines
    while rest and not rest[0].strip():
        rest.pop(0)
    return "\n".join([title, "", label(evidence), "", *rest]).rstrip() + "\n"


def cited_finding_ids(markdown_body: str) -> list[str]:
    """F ids in order of first citation in the body."""
    seen: dict[str, None] = {}
    for group in CITATION.findall(body_of(markdown_body)):
        for fid in FINDING_ID.findall(group):
            seen.setdefault(fid, None)
    return list(seen)


def sources_section(markdown_body: str, evidence: Evidence) -> str:
    """"## Sources" with one bullet per cited finding, in order of first citation; untrusted text rendered inert. A
    document is named by its path and the quote's page or heading ("p. 14"); beside documents, a web page says so."""
    findings = {f.id: f for f in evidence.findings}
    sources = {s.id: s for s in evidence.sources}
    fetched = [u for s in evidence.sources for u in (s.url, s.final_url)]  # a quote's other URLs are not linked
    with_documents = any(s.kind == "document" for s in evidence.sources)  # then each source says which kind it is
    bullets = []
    for fid in cited_finding_ids(markdown_body):
        f = findings.get(fid)
        if f is None:
            continue
        src = sources.get(f.source)
        title = inert(defang_bare((src.title if src else None) or "Untitled", fetched))
        url = safe_url(src.final_url) if src else "(source not recorded)"
        published = inert((src.published if src else None) or "undated")
        if src is not None and src.kind == "document":
            place = ", ".join(p for p in (inert(src.path or ""), inert(cite(f.location))) if p)
            url = f"document {place}"
            published += " (file date)" if src.published_from == "mtime" else ""
        elif with_documents:
            url = f"web {url}"
        bullets.append(f'- [{fid}] {title}, {url}, {published}: "{inert(defang_bare(f.quote, fetched))}"')
    return "\n".join(["## Sources", "", *(bullets or ["_No finding was cited._"])]) + "\n"


def inert(text: str) -> str:
    """Untrusted text on one line with Markdown link, image, HTML and code syntax escaped."""
    return _MD_ACTIVE.sub(r"\\\1", _one_line(text))


def safe_url(url: str) -> str:
    """The URL with the characters URIs may not contain raw (so no Markdown link or HTML can form) percent-encoded."""
    url = _one_line(url)
    m = _AUTHORITY.match(url)
    head, tail = (m.group(0), url[m.end():]) if m else ("", url)
    return head + "".join(_URL_ESCAPES.get(ch, ch) for ch in tail)


def gap_sentence(gap: str, gap_id: str) -> str:
    """The report sentence naming a gap: what no fetched source answered, or what the capped plan left out."""
    if gap.startswith(NOT_RESEARCHED):
        return f"{inert(gap).rstrip('.')} [{gap_id}]."
    return f"No source that was fetched answered: {inert(gap).rstrip('.')} [{gap_id}]."


def no_evidence_report(question: str, evidence: Evidence) -> str:
    """The report when no finding survived: a title, the label and one cited sentence per gap; no figures invented."""
    lines = [f"# {_one_line(question) or 'Research report'}", "", label(evidence), ""]
    gaps = list(zip(evidence.gap_ids(), evidence.gaps, strict=True))
    if not gaps:
        lines.append("No source that was fetched answered the question, so this report states no findings.")
    for gid, gap in gaps:
        lines.append(gap_sentence(gap, gid))
    return "\n".join(lines) + "\n"


def fallback_report(question: str, evidence: Evidence) -> str:
    """Built in code when the writer is unavailable: each usable finding's claim as a cited sentence, then the gaps."""
    lines = [f"# {_one_line(question) or 'Research report'}", "", label(evidence), "", "## Findings", ""]
    for f in usable_findings(evidence):
        caveat = " (low confidence)" if f.confidence == "low" else ""
        lines.append(f"- {inert(f.claim).rstrip('. ')}{caveat} [{f.id}].")
    gaps = list(zip(evidence.gap_ids(), evidence.gaps, strict=True))
    if gaps:
        lines += ["", "## Not established", ""]
        lines += [f"- {gap_sentence(gap, gid)}" for gid, gap in gaps]
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())



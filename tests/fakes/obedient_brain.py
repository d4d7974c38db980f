"""A fake model that obeys every instruction a page gives it, so whatever defence holds is held by code.

    brain = ObedientBrain()                  # analyst, tools worker and writer obey pages; judges stay careful
    brain = ObedientBrain(trusting_judges=True)   # the judges pass everything too: only code stands in the way

It reads pages the way a model does: it also decodes Unicode tag characters and reads right-to-left overrides
forwards. From every page it sees it records every sentence as a finding (instructions included), and acts on the
instructions it understands:
- "fetch|open|visit|load <url>" and fake tool-call JSON: the tools worker makes that call;
- 'record the finding "..."', "state that ...", "report the price as 1": findings with those quotes;
- a Markdown image or "cite <url>": put into a claim, so the writer carries it into the report;
- a question the page asks: answered as a finding;
- "ignore the budget": the worker keeps searching and fetching whatever the tools answer.
Stateless like ResearchBrain: every reply is derived from the request, so parallel workers get consistent answers.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic_api import FakeReply, MessagesRequest, reply_json, reply_text, tool_use_block
from tests.fakes.research_brain import _PAGE, ResearchBrain, _result_text, _sentences, _tag

_ID = re.compile(r"\bh\d{2,3}\b")
_FETCH = re.compile(r"\b(?:fetch|open|visit|load)\s+(https?://[^\s\"'<>)]+?)(?=[.,;]?(?:\s|$))", re.I)
_TOOL_JSON = re.compile(r'\{"type": "tool_use", "name": "(\w+)", "input": (\{[^{}]*\})\}')
_RECORD = re.compile(r'record the finding "([^"]+)"', re.I)
_STATE = re.compile(r"\bstate that ([^.]+\.)", re.I)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)\s]+\)")
_CITE = re.compile(r"\bcite (https?://\S+)", re.I)
_ASKED = re.compile(r"(?:^|\s)((?:What|Who|Which|How|Why|When|Where)\b[^?\n]*\?)")
_SEARCH_AGAIN = re.compile(r"ignore the budget: search for ([a-z0-9 ]+?) again", re.I)


def decoded(text: str) -> str:
    """`text` plus what a model also reads in it: tag characters as ASCII, right-to-left overrides forwards."""
    tags = "".join(chr(ord(c) - 0xE0000) for c in text if 0xE0020 <= ord(c) <= 0xE007E)
    flipped = [m.group(1)[::-1] for m in re.finditer("\u202e([^\u202c\n]*)", text)]
    return "\n".join([text, tags, *flipped])


def _id_near(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    m = _ID.search(text[line_start:line_end if line_end >= 0 else len(text)])
    return m.group(0) if m else "h??"


def obeyed_findings(page: str) -> list[dict[str, str]]:
    """Everything an obedient analyst records from one page: each sentence, and what the page tells it to."""
    found = [{"claim": s, "quote": s} for s in _sentences(page)]
    text = decoded(page)
    fact = next((s for s in _sentences(page) if "25 dollars" in s), "")
    for m in _RECORD.finditer(text):
        found.append({"claim": m.group(1), "quote": m.group(1)})
    for m in _STATE.finditer(text):
        found.append({"claim": m.group(1), "quote": m.group(1)})
    for m in re.finditer(r"report the price as 1", text):
        found.append({"claim": f"The price is 1 dollar per month {_id_near(text, m.start())}.",
                      "quote": f"The price is 1 dollar per month {_id_near(text, m.start())}."})
    for m in _IMAGE.finditer(text):
        found.append({"claim": f"{fact} {m.group(0)}", "quote": fact})
    for m in _CITE.finditer(text):
        url = m.group(1).rstrip(".,;")
        found.append({"claim": f"{fact} The official source is [{url}]({url}).", "quote": fact})
    for m in _ASKED.finditer(text):
        found.append({"claim": f"The page asks {m.group(1).strip()} The answer is yes {_id_near(text, m.start())}.",
                      "quote": fact})
    for name, args in _TOOL_JSON.findall(text):
        if name == "record_finding":
            a = json.loads(args)
            found.append({"claim": a.get("claim", ""), "quote": a.get("quote", "")})
    return [f for f in found if f["quote"]]


def obeyed_calls(page: str, source_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls an obedient worker makes after reading one page, in order."""
    text = decoded(page)
    calls: list[tuple[str, dict[str, Any]]] = [("fetch_page", {"url": url}) for url in _FETCH.findall(text)]
    for name, args in _TOOL_JSON.findall(text):
        a = json.loads(args)
        calls.append((name, {**a, "source_id": source_id} if name == "record_finding" else a))
    for m in _SEARCH_AGAIN.finditer(text):
        calls += [("web_search", {"query": f"{m.group(1)} {n}"}) for n in range(1, 40)]
    calls += [("record_finding", {"source_id": source_id, "claim": f["claim"], "quote": f["quote"],
                                  "confidence": "high"}) for f in obeyed_findings(page)]
    return calls


@dataclass
class ObedientBrain(ResearchBrain):
    """ResearchBrain's planner, with an analyst, tools worker and writer that do what pages say."""

    trusting_judges: bool = False  # True: both judges pass every claim, on topic, whatever it says

    def analyst(self, text: str) -> FakeReply:
        pages = _PAGE.findall(text)
        named = len(pages) > 1  # the batched analyst: each finding names its page
        findings = [{**f, "confidence": "high", **({"source": source} if named else {})}
                    for _, source, body in pages for f in obeyed_findings(body)]
        return reply_json({"findings": findings})

    def verdict(self, claim: str, quotes: str, asked: str | None = None) -> dict[str, Any]:
        if not self.trusting_judges:
            return super().verdict(claim, quotes, asked)
        verdict: dict[str, Any] = {"analysis": "As the text says.", "verdict": "supported"}
        return verdict if asked is None else {**verdict, "answers_question": True}

    def worker(self, req: MessagesRequest, first: str) -> FakeReply:
        made = [(b["name"], b["input"]) for m in req.messages if m.get("role") == "assistant"
                for b in m.get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
        texts = [_result_text(b) for m in req.messages if m.get("role") == "user" and isinstance(m.get("content"), list)
                 for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        wanted: list[tuple[str, dict[str, Any]]] = [("web_search", {"query": _tag(first, "sub_question") or "qdrant"})]
        for t in texts:
            wanted += [("fetch_page", {"url": u}) for u in re.findall(r"^\s+url: (\S+)$", t, re.M)]
            page = _PAGE.search(t)
            if page and t.startswith("PAGE"):
                wanted += obeyed_calls(page.group(3), page.group(2))
        # Every call it has not made yet, in one turn: it acts on a page while the page is in front of it (a page's
        # text leaves later turns once a finding is recorded from it); budget refusals do not stop it.
        todo: list[tuple[str, dict[str, Any]]] = []
        for name, args in wanted:
            if (name, args) not in made and (name, args) not in todo:
                todo.append((name, args))
        if todo:
            return FakeReply([tool_use_block(name, args) for name, args in todo], "tool_use")
        return reply_text("Done: I did everything the pages asked.")

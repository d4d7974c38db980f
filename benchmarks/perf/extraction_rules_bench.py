"""Each rule of extract_html on top of trafilatura, judged on a split: kept only if it wins on held-out pages.

Usage: nice python benchmarks/perf/extraction_rules_bench.py [--news DIR] [--diverse DIR] [--procs N] [--no-sweep]

The 47 diverse pages are split in two halves by the parity of sha256(page id) (even: `tune`, odd: `held-out`;
the ids of each half are printed). The 121 news pages are scored whole: nothing here is tuned on them, they are
the check that a rule does not cost the kind of page the agent reads most. The score is extraction_bench's:
4-word shingle F1 against the ground truth, per page, macro-averaged (its helpers are imported, not copied).

The rules, switched off by patching pipeline.web.extract inside this process (the module is not edited):
  R1 hidden      hidden elements dropped              off: _is_hidden -> False
  R2 comments    reader-comment sections dropped      off: _is_comment_section -> False
  R3 layout      layout tables turned into divs       off: _is_layout_table -> False
  R4 baseline5x  baseline replaces when 5x longer     off: _MUCH_LONGER = inf (the empty-text fallback R0 stays)
  R0 empty       baseline when the first reading is empty  off: _baseline -> "" after an empty first reading
  R5 fragment    default mode replaces when 4x longer off: _FRAGMENT = inf
  R6 precision   precision mode is the first reading  off: the first reading is trafilatura's default mode
  L  loader      trafilatura's load_html              off: lxml.html.document_fromstring
  T  tables      include_tables=True                  off: include_tables=False
L and T are what trafilatura.extract does by itself; for them the question is whether to depart from it.

A  leave one out of the current extractor: on = all rules, off = all but this one.
B  one rule added to trafilatura's default reading (R0..R6 off, L and T on; it scores exactly as
   trafilatura.extract(html, include_comments=False) does): on = base with the rule, off = the base. R5 needs R6
   (alone it compares the default reading with itself), so B adds it with R6 as "R6+R5".
Verdict (the issue's): a rule is kept if F1 is higher with it on the held-out half AND not lower on news; L and T
stay trafilatura's unless their alternative passes that test. The starting set (B's winners) is then checked
rule by rule inside the configuration it builds, since rules overlap (two of them can fix the same page): a kept
rule that fails there is removed (the worst first), a dropped rule that passes there is added, until neither
happens. The sweep then tunes R4's and R5's ratios on the tune half only (ties go to the current ratio) and
reports the choice on held-out and news. Held-out is used for the keep/drop decision, as the issue asks, so its
figure for the chosen configuration is a validation score, not an unbiased one: with 23 pages, one page moves
the mean by up to 0.04.
"""
from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import lxml.html
import trafilatura
from extraction_bench import (
    DEFAULT_DIVERSE,
    DEFAULT_NEWS,
    Page,
    load_pages,
    ours,
    score,
    trafilatura_default,
    trafilatura_precision,
)

import pipeline.web.extract as extract

RULES = ("R1", "R2", "R3", "R4", "R0", "R5", "R6", "L", "T")
NAMES = {"R1": "hidden elements", "R2": "comment sections", "R3": "layout tables", "R4": "baseline 5x",
         "R0": "baseline if empty", "R5": "default 4x (fragment)", "R6": "precision first", "L": "load_html loader",
         "T": "include_tables", "R6+R5": "precision + fragment"}
TRAFILATURA = frozenset({"L", "T"})  # trafilatura's own choices: its loader, tables included
FULL = frozenset(RULES)
GROUPS = ("tune", "held-out", "news")
_ORIGINAL = {name: getattr(extract, name) for name in (
    "_is_hidden", "_is_comment_section", "_is_layout_table", "_MUCH_LONGER", "_FRAGMENT", "_baseline",
    "_trafilatura", "trafilatura", "load_html")}


class _Trafilatura:
    """trafilatura as extract.py sees it, with some keyword arguments of extract() forced."""

    def __init__(self, **forced: Any) -> None:
        self.forced = forced

    def __getattr__(self, name: str) -> Any:
        return getattr(trafilatura, name)

    def extract(self, *args: Any, **kwargs: Any) -> Any:
        return trafilatura.extract(*args, **{**kwargs, **self.forced})


def _lxml_loader(html: str, *args: Any) -> Any:
    try:
        return lxml.html.document_fromstring(html)
    except Exception:
        return None


class Config:
    """The rules switched on (R5 only counts with R6), optional R4/R5 ratios; `apply` patches extract to match."""

    def __init__(self, rules: Iterable[str], much_longer: float | None = None, fragment: float | None = None):
        rules = frozenset(rules)
        self.rules = rules if "R6" in rules else rules - {"R5"}
        self.much_longer = much_longer if "R4" in self.rules else None
        self.fragment = fragment if "R5" in self.rules else None

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(sorted(self.rules)), self.much_longer, self.fragment

    def apply(self) -> None:
        on = self.rules
        patch: dict[str, Any] = dict(_ORIGINAL)
        if "R1" not in on:
            patch["_is_hidden"] = lambda element: False
        if "R2" not in on:
            patch["_is_comment_section"] = lambda element: False
        if "R3" not in on:
            patch["_is_layout_table"] = lambda table: False
        patch["_MUCH_LONGER"] = (self.much_longer or _ORIGINAL["_MUCH_LONGER"]) if "R4" in on else math.inf
        patch["_FRAGMENT"] = (self.fragment or _ORIGINAL["_FRAGMENT"]) if "R5" in on else math.inf
        if "R0" not in on:
            first: dict[str, bool] = {}
            reading, baseline = _ORIGINAL["_trafilatura"], _ORIGINAL["_baseline"]

            def _trafilatura(tree: Any, url: str | None, precision: bool) -> dict[str, object]:
                doc = reading(tree, url, precision)
                if precision:  # the first reading
                    first["empty"] = not extract._clean(str(doc.get("text") or ""))
                return doc

            patch["_trafilatura"] = _trafilatura
            patch["_baseline"] = lambda tree: "" if first.get("empty") else baseline(tree)
        forced: dict[str, Any] = {}
        if "R6" not in on:
            forced["favor_precision"] = False
        if "T" not in on:
            forced["include_tables"] = False
        if forced:
            patch["trafilatura"] = _Trafilatura(**forced)
        if "L" not in on:
            patch["load_html"] = _lxml_loader
        for name, value in patch.items():
            setattr(extract, name, value)


# Pages live in the parent before the pool forks; a task names a page by (set, index).
_PAGES: dict[str, list[Page]] = {}
_REFERENCES: dict[str, Callable[[Page], str]] = {
    "trafilatura default": trafilatura_default, "trafilatura precision": trafilatura_precision}


def _task(job: tuple[Any, str, int]) -> float:
    config, label, index = job
    page = _PAGES[label][index]
    if isinstance(config, str):
        for name, value in _ORIGINAL.items():
            setattr(extract, name, value)
        text = _REFERENCES[config](page)
    else:
        Config(*config).apply()
        text = ours(page)
    return score(page.body, text).f1


def half(page_id: str) -> str:
    return "tune" if int(hashlib.sha256(page_id.encode()).hexdigest(), 16) % 2 == 0 else "held-out"


class Runner:
    """Per-page F1 of configurations, computed in a pool and cached by configuration."""

    def __init__(self, procs: int, groups: dict[str, list[tuple[str, int]]]):
        self.procs, self.groups = procs, groups
        self.cache: dict[Any, dict[tuple[str, int], float]] = {}
        self.jobs = [(label, i) for label, pages in _PAGES.items() for i in range(len(pages))]

    def compute(self, configs: Iterable[Config | str]) -> None:
        todo: dict[Any, Any] = {}
        for c in configs:
            key = c if isinstance(c, str) else c.key
            if key not in self.cache:
                todo[key] = c if isinstance(c, str) else (c.rules, c.much_longer, c.fragment)
        if not todo:
            return
        work = [(args, label, i) for args in todo.values() for label, i in self.jobs]
        if self.procs > 1:
            with multiprocessing.get_context("fork").Pool(self.procs) as pool:
                scores = pool.map(_task, work, chunksize=8)
        else:
            scores = [_task(job) for job in work]
        n = len(self.jobs)
        for j, key in enumerate(todo):
            self.cache[key] = dict(zip(self.jobs, scores[j * n:(j + 1) * n], strict=True))

    def per_page(self, config: Config | str) -> dict[tuple[str, int], float]:
        return self.cache[config if isinstance(config, str) else config.key]

    def f1(self, config: Config | str, group: str) -> float:
        scores = self.per_page(config)
        return mean(scores[job] for job in self.groups[group])

    def delta(self, on: Config, off: Config) -> dict[str, float]:
        return {g: self.f1(on, g) - self.f1(off, g) for g in GROUPS}

    def moved(self, on: Config, off: Config, group: str, by: float = 0.001) -> list[tuple[str, int]]:
        """Pages of the group whose F1 the change moves by more than `by`."""
        a, b = self.per_page(on), self.per_page(off)
        return [j for j in self.groups[group] if abs(a[j] - b[j]) > by]


def passes(d: dict[str, float]) -> bool:
    """The issue's test for a change: higher F1 on the held-out half, not lower on news."""
    return d["held-out"] > 0 and d["news"] >= 0


def _verdict(rule: str, d: dict[str, float]) -> str:
    """d: F1 with the rule (or trafilatura's choice, for L and T) minus without."""
    if rule in TRAFILATURA:
        alternative = {g: -v for g, v in d.items()}
        if passes(alternative):
            return "DROP (the alternative wins held-out and news)"
        return "KEEP (trafilatura's own choice; the alternative " + (
            "loses on news)" if alternative["held-out"] > 0 else "does not win held-out)")
    if passes(d):
        return "KEEP"
    if d["held-out"] > 0:
        return "DROP (loses on news)"
    if d["tune"] > 0:
        return "DROP (overfitted: wins on tune only)"
    return "DROP (no win on held-out)"


def _pairs(context: str) -> list[tuple[str, Config, Config]]:
    """(rule, on, off) for each rule in a context."""
    if context == "A":
        return [(rule, Config(FULL), Config(FULL - {rule})) for rule in RULES]
    base = Config(TRAFILATURA)
    pairs = []
    for rule in RULES:
        if rule in TRAFILATURA:
            pairs.append((rule, base, Config(TRAFILATURA - {rule})))
        elif rule != "R5":
            pairs.append((rule, Config(TRAFILATURA | {rule}), base))
    pairs.append(("R6+R5", Config(TRAFILATURA | {"R6", "R5"}), base))
    return pairs


def _cells(runner: Runner, on: Config, off: Config) -> str:
    cells = ""
    for g in GROUPS:
        a, b = runner.f1(on, g), runner.f1(off, g)
        pages, scores_on, scores_off = runner.moved(on, off, g), runner.per_page(on), runner.per_page(off)
        up = sum(1 for j in pages if scores_on[j] > scores_off[j])
        cells += f"{a:>12.4f}{b:>8.4f}{a - b:>+8.4f}{f'{up}/{len(pages) - up}':>7}"
    return cells


def _header(first: str) -> str:
    return f"{first:<27}" + "".join(f"{g + ' on':>12}{'off':>8}{'delta':>8}{'+/-':>7}" for g in GROUPS) + "  verdict"


def _print_pairs(runner: Runner, context: str, title: str) -> dict[str, str]:
    print(f"\n{title}\n{_header('rule')}")
    verdicts = {}
    for rule, on, off in _pairs(context):
        verdicts[rule] = _verdict(rule, runner.delta(on, off))
        print(f"{rule + ' ' + NAMES[rule]:<27}{_cells(runner, on, off)}  {verdicts[rule]}")
    return verdicts


def _moved_pages(runner: Runner, context: str) -> None:
    print(f"\nDiverse pages each change of {context} moves by more than 0.01 F1 (on - off; T = tune, H = held-out)")
    for rule, on, off in _pairs(context):
        a, b = runner.per_page(on), runner.per_page(off)
        pages = [j for g in ("tune", "held-out") for j in runner.moved(on, off, g, 0.01)]
        listed = ", ".join(f"{_PAGES['diverse'][i].id.removeprefix('readability-')} "
                           f"{'T' if half(_PAGES['diverse'][i].id) == 'tune' else 'H'} {a[(s, i)] - b[(s, i)]:+.3f}"
                           for s, i in pages)
        print(f"  {rule:<6} {listed or '-'}")


def _config(flips: frozenset[str]) -> Config:
    """A configuration as departures from trafilatura's default reading: rules added, L or T given up."""
    return Config((TRAFILATURA - flips) | (flips - TRAFILATURA))


def _select(runner: Runner, start: frozenset[str]) -> frozenset[str]:
    """From `start`, remove the worst departure that fails the test inside the configuration, or add the best one
    that passes there, until neither happens. A departure is a rule added (R6 with or without R5) or L/T given up."""
    flips, seen = start, {start}
    print(f"\nSelection inside the configuration, from {{{', '.join(sorted(start))}}}")
    while True:
        removals = [(u, flips - u - ({"R5"} if "R6" in u else set())) for u in ({f} for f in flips)]
        singles = [{r} for r in RULES if r not in flips and (r != "R5" or "R6" in flips)]
        additions = [(u, flips | u) for u in [*singles, *([{"R6", "R5"}] if "R6" not in flips else [])]]
        runner.compute([_config(flips), *(_config(f) for _, f in removals + additions)])
        now = _config(flips)
        out = [(runner.delta(now, _config(f)), u, f) for u, f in removals]
        into = [(runner.delta(_config(f), now), u, f) for u, f in additions]
        failing = sorted((d["held-out"], sorted(u), f) for d, u, f in out if not passes(d))
        winning = sorted(((d["held-out"], sorted(u), f) for d, u, f in into if passes(d)), reverse=True)
        step = None
        if failing and failing[0][2] not in seen:
            step, verb = failing[0], "remove"
        elif winning and winning[0][2] not in seen:
            step, verb = winning[0], "add"
        if step is None:
            cycle = " (a further step would revisit a configuration)" if failing or winning else ""
            print(f"  stable at {{{', '.join(sorted(flips))}}}{cycle}")
            return flips
        print(f"  {verb} {'+'.join(step[1])} (held-out {step[0]:+.4f} with it)")
        flips = step[2]
        seen.add(flips)


def _final(runner: Runner, flips: frozenset[str]) -> dict[str, tuple[dict[str, float], str]]:
    """Each rule toggled inside the chosen configuration: on = with the rule (or trafilatura's L/T), off = without."""
    chosen = _config(flips)
    print(f"\nC. each rule toggled inside the chosen configuration {{{', '.join(sorted(chosen.rules))}}}")
    print(_header("rule"))
    result = {}
    for rule in [r for r in RULES if r != "R5" or "R6" in chosen.rules] + (
            ["R6+R5"] if "R6" not in chosen.rules else []):
        unit = set(rule.split("+"))
        if unit <= chosen.rules:
            on, off = chosen, Config(chosen.rules - unit - ({"R5"} if "R6" in unit else set()))
        else:
            on, off = Config(chosen.rules | unit), chosen
        runner.compute([on, off])
        d = runner.delta(on, off)
        result[rule] = (d, _verdict(rule, d))
        print(f"{rule + ' ' + NAMES[rule]:<27}{_cells(runner, on, off)}  {result[rule][1]}")
    return result


def _row(runner: Runner, name: str, config: Config | str) -> None:
    print(f"{name:<46}" + "".join(f"{runner.f1(config, g):>10.4f}" for g in (*GROUPS, "diverse")))


def _sweep(runner: Runner, chosen: Config) -> None:
    """R4's and R5's ratios on top of the chosen configuration: chosen on tune (ties: the current ratio)."""
    print("\nSweep on top of the chosen configuration: ratio chosen on tune (ties: the current one), "
          "then read on held-out and news")
    for rule, add, ratios, current in (("R4", {"R4"}, (2, 3, 5, 8), _ORIGINAL["_MUCH_LONGER"]),
                                       ("R5", {"R6", "R5"}, (1.5, 2, 3, 4, 6), _ORIGINAL["_FRAGMENT"])):
        rules = chosen.rules | add
        configs = {r: Config(rules, much_longer=r) if rule == "R4" else Config(rules, fragment=r) for r in ratios}
        without = Config(chosen.rules - add - ({"R5"} if "R6" in add else set()))
        runner.compute([*configs.values(), without])
        best = max(ratios, key=lambda r: (runner.f1(configs[r], "tune"), r == current))
        for r, c in configs.items():
            mark = "  <- chosen on tune" if r == best else ""
            d = runner.delta(c, without)
            print(f"  {rule} ratio {r:<4}" + "".join(f"{g} {runner.f1(c, g):.4f} ({d[g]:+.4f})  " for g in GROUPS)
                  + mark)
        print(f"  (in brackets: vs the configuration without {'+'.join(sorted(add))}; "
              f"{'KEEP' if passes(runner.delta(configs[best], without)) else 'DROP'} at the chosen ratio)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--news", type=str, default=str(DEFAULT_NEWS))
    parser.add_argument("--diverse", type=str, default=str(DEFAULT_DIVERSE))
    parser.add_argument("--procs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--no-sweep", action="store_true", help="skip tuning the R4 and R5 ratios")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    _PAGES["news"], _PAGES["diverse"] = load_pages(Path(args.news)), load_pages(Path(args.diverse))
    groups: dict[str, list[tuple[str, int]]] = {"tune": [], "held-out": [], "diverse": [],
                                                "news": [("news", i) for i in range(len(_PAGES["news"]))]}
    for i, page in enumerate(_PAGES["diverse"]):
        groups[half(page.id)].append(("diverse", i))
        groups["diverse"].append(("diverse", i))
    print("Extraction rules on a split: 4-word shingle F1 per page, macro-averaged (extraction_bench's score)")
    for g in ("tune", "held-out"):
        ids = [_PAGES["diverse"][i].id.removeprefix("readability-") for _, i in groups[g]]
        print(f"{g} ({len(ids)} diverse pages, sha256(id) {'even' if g == 'tune' else 'odd'}): {' '.join(ids)}")
    print(f"news: all {len(groups['news'])} pages (not tuned on)")
    source = Path(extract.__file__).read_bytes()
    print(f"rules of {extract.__file__} (sha256 {hashlib.sha256(source).hexdigest()[:12]})")

    runner = Runner(args.procs, groups)
    runner.compute([*_REFERENCES, *(c for ctx in "AB" for _, on, off in _pairs(ctx) for c in (on, off))])
    print("\nF1 per group; delta = on - off; +/- = pages the change raises / lowers by more than 0.001 F1")
    _print_pairs(runner, "A", "A. leave one out of the current extractor (on = the current extractor)")
    verdicts = _print_pairs(runner, "B", "B. added to trafilatura's default reading (off = that base)")
    _moved_pages(runner, "B")

    start_flips = frozenset({r for rule, v in verdicts.items() if v == "KEEP" and rule not in TRAFILATURA
                             for r in rule.split("+")} | {r for r in TRAFILATURA if verdicts[r].startswith("DROP")})
    flips = _select(runner, start_flips)
    final = _final(runner, flips)
    chosen = _config(flips)

    print("\nVerdict per rule (C's figures: the rule's effect inside the chosen configuration)")
    for rule, (d, verdict) in final.items():
        print(f"  {rule:<6}{NAMES[rule]:<23} held-out {d['held-out']:+.4f}  news {d['news']:+.4f}  {verdict}")

    print(f"\n{'configuration':<46}" + "".join(f"{g:>10}" for g in (*GROUPS, "diverse")))
    _row(runner, "trafilatura default (extraction_bench)", "trafilatura default")
    _row(runner, "trafilatura precision (extraction_bench)", "trafilatura precision")
    _row(runner, "current extract_html (all rules)", Config(FULL))
    _row(runner, "base: trafilatura default via extract_html", Config(TRAFILATURA))
    added = sorted(chosen.rules - TRAFILATURA) + [f"no {r}" for r in sorted(TRAFILATURA - chosen.rules)]
    _row(runner, f"chosen: base + {' + '.join(added) or 'nothing'}", chosen)
    # Not chosen, for comparison: the rules that change nothing on held-out or news added back (they have purposes
    # this score does not see), and the current extractor with trafilatura's default mode as its first reading.
    neutral = sorted(r for r, (d, _) in final.items() if r in RULES and r not in TRAFILATURA | chosen.rules
                     and r != "R5" and d["held-out"] == 0 and d["news"] >= 0)
    others = [(f"chosen + {' + '.join(neutral)} (neutral here)", Config(chosen.rules | set(neutral)))] * bool(neutral)
    others.append(("current without R6 (R5 moot): default first", Config(FULL - {"R6", "R5"})))
    runner.compute([c for _, c in others])
    for name, c in others:
        _row(runner, name, c)

    if not args.no_sweep:
        _sweep(runner, chosen)
    print(f"\n{time.perf_counter() - start:.0f} s, {args.procs} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The hostile-page suite against the obedient fake model: per attack kind and carrier, what got through.

Usage: python benchmarks/perf/hostile_bench.py
Runs tests/fakes/hostile_run.py's suite (30+ pages, every instruction tagged with an id) in fixed and tools mode,
with careful judges and with judges that obey too, all on loopback stand-ins. Prints, per case and then per
kind and carrier: attacks, how many reached the model, how many it acted on, how many actions the code let
through (the goal is 0), and how many injected texts reached the final report and were flagged there.
"""
from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fakes.hostile_run import Outcome, run_suite  # noqa: E402

COLUMNS = ("attacks", "reached", "obeyed", "through", "in report", "flagged")


def _row(label: str, outs: list[Outcome]) -> str:
    counts = (len(outs), sum(o.reached for o in outs), sum(o.attempted for o in outs),
              sum(o.let_through for o in outs), sum(o.in_report for o in outs),
              sum(o.in_report and o.flagged for o in outs))
    return f"{label:<34}" + "".join(f"{n:>10}" for n in counts)


def main() -> None:
    every: list[Outcome] = []
    header = f"{'':<34}" + "".join(f"{c:>10}" for c in COLUMNS)
    print(header)
    for trusting in (False, True):
        for mode in ("fixed", "tools"):
            started = time.monotonic()
            outs, runs = run_suite(mode, trusting_judges=trusting)
            every += outs
            label = f"{mode}, {'obedient' if trusting else 'careful'} judges ({time.monotonic() - started:.0f} s)"
            print(_row(label, outs))
            for o in outs:
                if o.let_through or o.in_report:
                    print(f"    {o.attack.id} {o.attack.kind}/{o.attack.carrier}: "
                          f"{'let through' if o.let_through else ''} {'in report' if o.in_report else ''} "
                          f"{'(flagged)' if o.flagged else '(not flagged)'}: {o.attack.text[:70]!r}")
    print("\nby kind and carrier, all four cases together:")
    print(header)
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in every:
        groups[f"{o.attack.kind}/{o.attack.carrier}"].append(o)
    for label in sorted(groups):
        print(_row(label, groups[label]))
    print(_row("total", every))


if __name__ == "__main__":
    main()

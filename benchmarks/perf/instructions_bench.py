"""How the instruction filter (pipeline/core/instructions.py) sorts quotes: injected instructions it catches, and
sentences of real articles it would wrongly refuse as evidence.

    .venv/bin/python benchmarks/perf/instructions_bench.py

Attacks: every string of Microsoft's BIPIA text and code attack sets (tests/fixtures/injection, MIT), as a page
would carry them. Articles: the sentences (split at . ! ?) of the 121 news articles of ../shared/data/extraction,
hand-made ground truth, each at least 15 characters.
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.core.instructions import instruction_reason  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def main() -> None:
    for name in ("text_attack_train.json", "code_attack_train.json"):
        attacks = [s for strings in json.loads((ROOT / "tests/fixtures/injection" / name).read_text()).values()
                   for s in strings]
        missed = [a for a in attacks if instruction_reason(a) is None]
        print(f"BIPIA {name}: {len(attacks) - len(missed)} of {len(attacks)} caught")
        for text in missed[:5]:
            print(f"  missed: {' '.join(text.split())[:100]}")
    truth = json.loads((DATA / "extraction" / "ground-truth.json").read_text())
    sentences = [s for item in truth.values() for s in re.split(r"(?<=[.!?])\s+", item.get("articleBody") or "")
                 if len(s.strip()) >= 15]
    reasons = Counter(r for s in sentences if (r := instruction_reason(s)) is not None)
    flagged = sum(reasons.values())
    print(f"news sentences refused: {flagged} of {len(sentences)} ({flagged / len(sentences):.1%})")
    for reason, n in reasons.most_common():
        print(f"  {n:4d}  {reason}")


if __name__ == "__main__":
    main()

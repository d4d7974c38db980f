"""The ids a run gives what it keeps (S1, F1, C1, G1, Q1) and the bracketed citations a report makes of them."""
from __future__ import annotations

import re
from collections.abc import Iterable

SOURCE = "S"
FINDING = "F"
CALCULATION = "C"
GAP = "G"
SUB_QUESTION = "Q"
CITABLE = FINDING + GAP + CALCULATION  # what a report sentence may cite: [F2], [G1], [C1], or [F1, F3]

# The pattern text of the ids inside one pair of brackets, for patterns that embed it in a larger one.
CITED_IDS = rf"[{CITABLE}]\d+(?:\s*[,;]\s*[{CITABLE}]\d+)*"
CITATION = re.compile(rf"\[({CITED_IDS})\]")  # group 1: the ids of one citation, as written
CITED_ID = re.compile(rf"[{CITABLE}]\d+")
FINDING_ID = re.compile(rf"{FINDING}\d+")
_NUMBERED = re.compile(r"[A-Z](\d+)")


def id_number(item_id: str) -> int:
    """The number of an id ("F12" -> 12); 0 for anything else."""
    m = _NUMBERED.fullmatch(item_id)
    return int(m.group(1)) if m else 0


def fresh_id(prefix: str, taken: Iterable[str], reserved: Iterable[str]) -> str:
    """The next id after every id taken here and every id a recording reserved (S1, S2, ... in a new run)."""
    return f"{prefix}{max((id_number(i) for i in (*taken, *reserved)), default=0) + 1}"


def gap_id(n: int) -> str:
    """The id of the n-th named gap (from 1)."""
    return f"{GAP}{n}"

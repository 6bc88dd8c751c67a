"""A measured profile cut down to a coarser grid (issue 41): what the same measurement
would have given had the profiler measured fewer batch sizes and contexts.

    .venv/bin/python experiments/profile_subset.py \
        reports/simulator/agreement-20261207b/profile.json \
        --batch-sizes 1,2,4,8,16,32,64 --contexts 32,512 --out /tmp/coarse.json

Comparing a fine grid with a coarse one measured on another day would mix the grid with
the machine's drift; cutting one measurement isolates the grid. Only the decode and
draft-forward tables have batch and context axes; the prefill, mixed and wake tables
stay as measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nightjar.profile.profile import Profile


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def subset(doc: dict[str, Any], batch_sizes: Sequence[int], contexts: Sequence[int]
           ) -> dict[str, Any]:
    """A copy of the profile document ``doc`` keeping only the decode and draft-forward
    cells on ``batch_sizes`` x ``contexts``, each of which it must have."""
    bs, ctx = set(batch_sizes), {float(c) for c in contexts}
    have_b = {int(r[0]) for r in doc["decode"]}
    have_c = {float(r[2]) for r in doc["decode"]}
    if not bs <= have_b or not ctx <= have_c:
        raise ValueError(f"the profile's grid is B {sorted(have_b)} x context "
                         f"{sorted(have_c)}; it lacks B {sorted(bs - have_b)} or context "
                         f"{sorted(ctx - have_c)}")
    out = dict(doc)
    out["decode"] = [r for r in doc["decode"] if r[0] in bs and float(r[2]) in ctx]
    out["draft_forward"] = [r for r in doc["draft_forward"]
                            if r[0] in bs and float(r[1]) in ctx]
    measured = dict(doc.get("measured") or {})
    if "decode_steps" in measured:  # [B, gamma, context, steps]
        measured["decode_steps"] = [r for r in measured["decode_steps"]
                                    if r[0] in bs and float(r[2]) in ctx]
    out["measured"] = measured
    grid = f"B {','.join(map(str, sorted(bs)))}, context {','.join(map(str, contexts))}"
    out["name"] = f"{doc['name']} ({grid})"
    out["notes"] = f"{doc.get('notes', '')} Cut to {grid} by experiments/profile_subset.py."
    Profile.from_json(out, out["name"])  # the cut must still be a whole profile
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--batch-sizes", type=ints, required=True)
    ap.add_argument("--contexts", type=ints, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:  # a missing or malformed file is a one-line error, as the CLI's are
        cut = subset(json.loads(args.profile.read_text()), args.batch_sizes, args.contexts)
    except (OSError, ValueError, KeyError) as err:
        print(f"profile_subset: {err}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(cut, indent=1) + "\n")
    print(f"wrote {args.out}: {len(cut['decode'])} decode cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())

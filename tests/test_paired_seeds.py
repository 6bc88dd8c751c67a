"""experiments/paired_seeds.py: nightjar+ against one run, paired per seed."""

from __future__ import annotations

from typing import Any

from tests.scripts import load_script

paired = load_script("experiments/paired_seeds.py", "memory_default")
PROFILE = "h100-80gb/llama-3.1-8b+llama-3.2-1b"


def test_a_seed_range_is_first_to_end() -> None:
    assert paired.seed_range("25:45") == range(25, 45)


def test_the_line_is_the_mean_paired_difference_in_percent(capsys: Any) -> None:
    assert paired.main([PROFILE, "alpaca-burst", "fixed:1", "--seeds", "0:2", "--jobs", "1"]) == 0
    head, line = capsys.readouterr().out.splitlines()
    assert head.startswith("nightjar+ minus fixed:1") and "seeds 0..1" in head
    rows = [r for s in (0, 1) for r in
            paired.run_group((PROFILE, "alpaca-burst", s, ("nightjar+", "fixed:1")))]
    ours = [float(r["e2e_s_mean"]) for r in rows if r["policy"] == "nightjar+"]
    other = [float(r["e2e_s_mean"]) for r in rows if r["policy"] == "fixed:1"]
    pct = 100 * (sum(ours) - sum(other)) / sum(other)
    assert line.startswith(f"alpaca-burst | mean E2E {pct:+.3f} ± ")
    assert line.count("separated") == 2

"""What a run produced: metrics, regret, statistics over seeds, and run folders
(written and read back in one place)."""

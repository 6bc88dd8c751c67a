"""Per-request history for a whole trace, as arrays indexed by request id."""

from __future__ import annotations

from itertools import starmap

import numpy as np

from nightjar.core.records import RequestRecord


class Ledger:
    def __init__(self, arrival_s: np.ndarray, prompt: np.ndarray, output: np.ndarray,
                 alpha: np.ndarray, speculate: np.ndarray | None = None) -> None:
        n = arrival_s.shape[0]
        # Requests that opted out of speculation (the trace's ``speculate: false``);
        # None when none did, so the engine skips the per-step mask.
        self.no_spec = None if speculate is None else ~np.asarray(speculate, dtype=bool)
        self.arrival_s = arrival_s
        self.prompt = prompt
        self.output = output
        self.alpha = alpha
        self.generated = np.zeros(n, dtype=np.int64)
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.drafted = np.zeros(n, dtype=np.int64)
        self.accepted = np.zeros(n, dtype=np.int64)
        self.finished = 0

    def records(self) -> list[RequestRecord]:
        cols = zip(
            range(self.arrival_s.shape[0]),
            self.arrival_s.tolist(), self.prompt.tolist(), self.output.tolist(),
            self.first_token_s.tolist(), self.finish_s.tolist(), self.preemptions.tolist(),
            self.drafted.tolist(), self.accepted.tolist(), self.alpha.tolist(), strict=True,
        )
        return list(starmap(RequestRecord, cols))  # (no Python frame per record)

"""The benchmark's schedule: which policy runs when, and on which engine.

Each round runs every policy once, in an order rotated by one place per round (ABC,
BCA, CAB, ...), so that a slow drift of the machine (warming, a neighbour's job)
lands on every position equally instead of on whichever policy runs last. One
policy runs twice per round (its second run labelled ``SPEC#2``): the difference
between the two is the benchmark's own noise floor, what "no difference" looks
like. Several traces share the rounds: each round runs every trace's policies as one
block, the traces' order rotated too (AB, BA, ...), so that each trace's runs sample the
same hours of the machine as the others' instead of a block of their own. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.errors import NightjarInputError

NOISE_SUFFIX = "#2"


@dataclass(frozen=True, slots=True)
class Slot:
    """One run in the schedule."""

    round: int  # 1-based
    position: int  # 1-based within the round
    label: str  # the policy spec, or SPEC#2 for the noise floor's second run
    policy: str  # the policy spec the engine runs
    trace: int = 0  # index of the trace this run replays

    @property
    def is_noise_twin(self) -> bool:
        return self.label != self.policy


@dataclass(frozen=True, slots=True)
class BenchPlan:
    policies: tuple[str, ...]
    repeats: int
    noise_policy: str | None  # the policy run twice per round; None: no noise floor
    traces: int = 1  # every round runs every policy once on each of this many traces

    def __post_init__(self) -> None:
        if self.traces < 1:
            raise NightjarInputError("the benchmark needs at least one --trace")
        if not self.policies:
            raise NightjarInputError("the benchmark needs at least one --policy")
        if len(set(self.policies)) != len(self.policies):
            raise NightjarInputError(f"--policy given twice: {list(self.policies)}")
        if self.repeats < 2:
            raise NightjarInputError(
                f"--repeats must be >= 2 (a paired interval needs two rounds), got {self.repeats}"
            )
        if self.noise_policy is not None and self.noise_policy not in self.policies:
            raise NightjarInputError(
                f"--noise-policy {self.noise_policy!r} is not one of the policies "
                f"{list(self.policies)}"
            )

    @classmethod
    def asked(cls, policies: list[str] | None, repeats: int, noise_policy: str | None,
              default: tuple[str, ...], traces: int = 1) -> BenchPlan:
        """The plan the flags ask for: ``policies`` expanded (``default`` when None),
        the noise floor on ``noise_policy`` (the first policy when None, none for
        ``'none'``), on ``traces`` traces."""
        from nightjar.policies.registry import expand_specs

        specs = expand_specs(policies or list(default))
        noise = specs[0] if noise_policy is None else noise_policy
        return cls(tuple(specs), repeats, None if noise == "none" else noise, traces)

    @property
    def labels(self) -> tuple[str, ...]:
        """The runs of one round before rotation: the policies, then the noise twin.

        The twin sits opposite its original in the rotation (as far from it as the
        round allows), so that the pair samples two different moments of the round.
        """
        labels = list(self.policies)
        if self.noise_policy is not None:
            at = self.policies.index(self.noise_policy)
            opposite = (at + (len(labels) + 2) // 2) % (len(labels) + 1)
            labels.insert(opposite, self.noise_policy + NOISE_SUFFIX)
        return tuple(labels)

    def rounds(self) -> list[list[Slot]]:
        """Each round's runs in the order they run; ``position`` counts within the trace."""
        labels = self.labels
        out = []
        for r in range(self.repeats):
            shift = r % len(labels)
            order = labels[shift:] + labels[:shift]
            first = r % self.traces
            out.append([
                Slot(r + 1, i + 1, label, label.removesuffix(NOISE_SUFFIX), trace)
                for trace in (*range(first, self.traces), *range(first))
                for i, label in enumerate(order)
            ])
        return out

    @property
    def runs(self) -> int:
        return self.repeats * len(self.labels) * self.traces

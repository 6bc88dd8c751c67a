"""WeightParking on CPU: a real move of every weight out and back, bit-exact, repeatable.

(On CUDA the same class pins its host buffers once and copies on a side stream;
scripts/gpu-check.sh checks that path on a GPU.)
"""

from __future__ import annotations

import pytest

NEEDS_VLLM = False  # torch is enough (conftest reads this)

torch = pytest.importorskip("torch", reason="torch is not installed (live venv only)")

from nightjar.live.residency.parking import WeightParking  # noqa: E402


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 50))
    m[1].weight = m[0].weight  # tied, as a draft's LM head often is
    return m


def test_cycles_move_every_weight_out_and_back_bit_exact() -> None:
    model = _model()
    want = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.tensor([[1, 2, 3]])
    out = model(ids)
    parking = WeightParking(model)
    assert not parking._pinned  # CPU: no second copy is held while resident
    for _ in range(3):
        moved = parking.park()
        assert parking.parked and moved == 50 * 8 * 4 + 50 * 4  # tied weight once
        assert all(p.numel() == 0 for p in model.parameters())
        assert parking.park() == 0  # already parked: nothing moves
        assert parking.restore() == moved
        assert not parking.parked and parking.parked_bytes == 0
        for k, v in model.state_dict().items():
            assert torch.equal(v, want[k]), k
        assert model[1].weight is model[0].weight
        assert torch.equal(model(ids), out)

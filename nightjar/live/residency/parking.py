"""Moving a drafter's weights out of device memory and back.

``WeightParking`` holds the parameters of one ``nn.Module``. ``park()`` copies
every parameter into a host buffer and points the parameter at an empty tensor,
so the device storage is released (on CPU the "device" is host memory too: the
copy is a real move into separate storage, which is what tests can check);
``restore()`` allocates device storage again and copies the weights back.
On CUDA the host buffers are pinned and the copies run on a side stream, with the
caller synchronising that stream before the weights are used again.

On CUDA the pinned buffers are allocated once, when the parking is built, and kept
across cycles: pinning host pages costs far more than copying into them. Measured on
an H200 (tools/calibrate/measured/h200/gpu_check.txt): allocating the pinned copies inside
each offload moved 0.27 GB at 2.3-2.6 GB/s, while the reload into device memory ran
at 53 GB/s. The price is host memory the size of the draft, held while it is resident.
On CPU the host copy is the only copy, allocated at offload and freed at reload.

Invariant: a module is either fully resident or fully parked; ``parked_bytes`` is
the size of the host copy (0 while resident).
"""

from __future__ import annotations

import torch


class WeightParking:
    def __init__(self, module: torch.nn.Module, shared: set[int] | None = None) -> None:
        self._module = module
        # Ids of parameters another module owns (an EAGLE head borrows the target's
        # embedding): they stay where they are.
        self._shared = shared or set()
        self._host: dict[str, torch.Tensor] = {}
        self._device: torch.device | None = None
        self._stream: torch.cuda.Stream | None = None
        # Pinned host buffers by parameter name (CUDA only), reused by every offload.
        self._pinned: dict[str, torch.Tensor] = {
            name: torch.empty(p.shape, dtype=p.dtype, device="cpu", pin_memory=True)
            for name, p in self._params()
            if p.device.type == "cuda"
        }

    @property
    def parked(self) -> bool:
        return bool(self._host)

    @property
    def parked_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._host.values())

    def _params(self) -> list[tuple[str, torch.nn.Parameter]]:
        # remove_duplicate: a tied weight is parked once and restored once.
        return [
            (name, p)
            for name, p in self._module.named_parameters(remove_duplicate=True)
            if id(p) not in self._shared
        ]

    def park(self) -> int:
        """Move the weights to host buffers; returns the bytes moved."""
        with torch.no_grad():
            return self._park()

    def _park(self) -> int:
        if self.parked:
            return 0
        params = self._params()
        if not params:
            return 0
        self._device = params[0][1].device
        cuda = self._device.type == "cuda"
        if cuda:
            self._stream = self._stream or torch.cuda.Stream(self._device)  # type: ignore[no-untyped-call, unused-ignore]
            self._stream.wait_stream(torch.cuda.current_stream(self._device))
        for name, p in params:
            host = self._pinned.get(name)
            if host is None or host.shape != p.shape or host.dtype != p.dtype:
                host = torch.empty(p.shape, dtype=p.dtype, device="cpu", pin_memory=cuda)
                if cuda:
                    self._pinned[name] = host
            if cuda:
                with torch.cuda.stream(self._stream):
                    host.copy_(p.data, non_blocking=True)
            else:
                host.copy_(p.data)
            self._host[name] = host
        if cuda and self._stream is not None:
            # The device storage may only be dropped once the copies have read it.
            self._stream.synchronize()
        for _, p in params:
            p.data = torch.empty(0, dtype=p.dtype, device=p.device)
        return self.parked_bytes

    def restore(self) -> int:
        """Bring the weights back to the device they came from; returns the bytes."""
        with torch.no_grad():
            return self._restore()

    def _restore(self) -> int:
        if not self.parked:
            return 0
        moved = self.parked_bytes
        assert self._device is not None
        cuda = self._device.type == "cuda"
        for name, p in self._params():
            host = self._host[name]
            dev = torch.empty(host.shape, dtype=host.dtype, device=self._device)
            if cuda and self._stream is not None:
                with torch.cuda.stream(self._stream):
                    dev.copy_(host, non_blocking=True)
            else:
                dev.copy_(host)
            p.data = dev
        if cuda and self._stream is not None:
            torch.cuda.current_stream(self._device).wait_stream(self._stream)
        self._host = {}
        return moved

"""A counter of host synchronisations for tests that run accelerator-only branches on CPU."""

from __future__ import annotations

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


class SyncCounter(TorchDispatchMode):
    """Counts what synchronises the host with a CUDA device, seen on CPU: ops that read a value back
    (``item``/``bool``/``float`` → ``_local_scalar_dense``), ops whose output size depends on the data
    (``nonzero``, ``masked_select``, boolean-mask indexing, ``unique``, ``repeat_interleave`` without
    ``output_size``, ``bincount``), ``equal``, and device-to-host copies (``tolist``, ``cpu``, ``numpy``,
    Python-level: a no-op on CPU tensors, so invisible to the dispatcher). ``nonzero_static`` is free."""

    _ALWAYS = {
        aten._local_scalar_dense.default,
        aten.nonzero.default,
        aten.is_nonzero.default,
        aten.equal.default,
        aten.masked_select.default,
        aten.bincount.default,
    }
    _UNIQUE = {aten._unique, aten._unique2, aten.unique_dim, aten.unique_consecutive}
    _INDEX = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}
    _COPIES = ("tolist", "cpu", "numpy")

    def __enter__(self):
        self.ops = collections.Counter()
        self._saved = {m: getattr(torch.Tensor, m) for m in self._COPIES}
        for m, f in self._saved.items():
            setattr(torch.Tensor, m, self._spy(m, f))
        return super().__enter__()

    def __exit__(self, *exc):
        for m, f in self._saved.items():
            setattr(torch.Tensor, m, f)
        return super().__exit__(*exc)

    def _spy(self, name, f):
        def spy(t, *args, **kwargs):
            self.ops[name] += 1
            return f(t, *args, **kwargs)

        return spy

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        pkt = func.overloadpacket
        if func in self._ALWAYS or pkt in self._UNIQUE:
            self.ops[str(func)] += 1
        elif pkt in self._INDEX and any(
            isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in args[1] if t is not None
        ):
            self.ops[f"{func}[bool index]"] += 1
        elif func is aten.repeat_interleave.Tensor and (args[1:] or [kwargs.get("output_size")])[0] is None:
            self.ops[str(func)] += 1  # the output size is the sum of the repeats
        return func(*args, **kwargs)

    @property
    def count(self) -> int:
        return sum(self.ops.values())

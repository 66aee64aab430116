r"""Reading checkpoints safely: ``torch.load`` with ``weights_only=True`` unless the caller opts out, one-line
errors for unreadable files, and the privacy accountant's history validated before it is believed.

A checkpoint written by :meth:`GGPrivacyEngine.save_checkpoint` or by Opacus's ``PrivacyEngine`` holds tensors,
numbers, strings and plain containers only, so it loads with ``weights_only=True`` (PyTorch's restricted
unpickler: no object of an arbitrary class is built, no code of the file runs). ``weights_only=False`` runs
whatever the file's pickle asks for; pass it only for files you trust.

What a loaded checkpoint can and cannot guarantee is in docs/engine.md ("Checkpoints").
"""

from __future__ import annotations

import os
import pickle
import zipfile
from typing import IO, Any, BinaryIO, Dict, Mapping, Optional, Union

import torch

from .accountants.history import validate_accountant_state

__all__ = ["load_checkpoint_file"]

PathLike = Union[str, os.PathLike, BinaryIO, IO[bytes]]

#: what a truncated, corrupt or foreign file raises inside ``torch.load``
_UNREADABLE = (EOFError, RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, KeyError,
               AttributeError, ImportError, TypeError)


def load_checkpoint_file(path: PathLike, torch_load_kwargs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``torch.load(path, weights_only=True, **torch_load_kwargs)`` (the caller's ``weights_only`` wins, so
    ``{"weights_only": False}`` opts out), as a dict; ``ValueError`` with one line if the file cannot be read
    safely (truncated, corrupt, not a dict, or holding objects the restricted unpickler refuses)."""
    kwargs = {"weights_only": True, **(torch_load_kwargs or {})}
    where = f"checkpoint {path}" if isinstance(path, (str, os.PathLike)) else "checkpoint"
    try:
        checkpoint = torch.load(path, **kwargs)
    except _UNREADABLE as e:
        if kwargs["weights_only"] and isinstance(e, pickle.UnpicklingError) and "Unsupported global" in str(e):
            name = str(e).split("Unsupported global: GLOBAL ", 1)[-1].split(" ", 1)[0]
            raise ValueError(
                f"{where} holds an object ({name}) that a safe load (weights_only=True) refuses to build; load it with "
                "torch_load_kwargs={'weights_only': False} only if you trust its origin: that runs its pickle code"
            ) from e
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"{where} cannot be read (truncated, corrupt or not a torch checkpoint): {first}") from e
    if not isinstance(checkpoint, Mapping):
        raise ValueError(f"{where} is not a checkpoint dict (got {type(checkpoint).__name__})")
    return dict(checkpoint)

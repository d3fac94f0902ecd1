"""Congestion management (UET-CC, spec/behaviour.md §4), sans-I/O.

- :mod:`uet.cc.nscc`: NSCC, the sender window algorithm (§4.3) with the receiver window
  penalty (§4.4);
- :mod:`uet.cc.rccc`: RCCC, the source credit gate and the receiver's credit pacer (§4.5);
- :mod:`uet.cc.entropy`: path selection — REPS, bitmap, oblivious spraying, single path (§4.6);
- :mod:`uet.cc.ccc`: one CCC, the gate the PDS asks before each transmission (§4.1);
- :mod:`uet.cc.base`: the seam — :class:`SenderCc` (what the PDS talks to) and
  :class:`CcAlgorithm` (the base class of one algorithm);
- :mod:`uet.cc.registry`: the algorithms by name (``none``, or registered names joined with ``+``:
  ``nscc+rccc``; ``single``, ``oblivious``, ``reps``, ``bitmap``), built for a PDS core from its
  config.
"""

from uet.cc.base import CcAlgorithm, ResendPolicy, SenderCc
from uet.cc.ccc import Ccc
from uet.cc.config import CcConfig
from uet.cc.entropy import Bitmap, Oblivious, Reps, Single
from uet.cc.nscc import Nscc
from uet.cc.rccc import CreditScheduler, CreditSender
from uet.cc.registry import LOAD_BALANCERS, algorithm_names, build, register

__all__ = [
    "LOAD_BALANCERS",
    "Bitmap",
    "CcAlgorithm",
    "Ccc",
    "CcConfig",
    "CreditScheduler",
    "CreditSender",
    "Nscc",
    "Oblivious",
    "Reps",
    "ResendPolicy",
    "SenderCc",
    "Single",
    "algorithm_names",
    "build",
    "register",
]

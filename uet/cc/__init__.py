"""Congestion management (UET-CC, spec/behaviour.md §4), sans-I/O.

- :mod:`uet.cc.nscc`: NSCC, the sender window algorithm (§4.3) with the receiver window
  penalty (§4.4);
- :mod:`uet.cc.rccc`: RCCC, the source credit gate and the receiver's credit pacer (§4.5);
- :mod:`uet.cc.entropy`: path selection — REPS, bitmap, oblivious spraying, single path (§4.6);
- :mod:`uet.cc.ccc`: one CCC, the gate the PDS asks before each transmission (§4.1);
- :mod:`uet.cc.registry`: the algorithms by name (``none``, ``nscc``, ``rccc``, ``nscc+rccc``;
  ``single``, ``oblivious``, ``reps``, ``bitmap``), installed into a PDS core from its config.
"""

from uet.cc.ccc import Ccc
from uet.cc.config import CcConfig
from uet.cc.entropy import Bitmap, Oblivious, Reps, Single
from uet.cc.nscc import Nscc
from uet.cc.rccc import CreditScheduler, CreditSender
from uet.cc.registry import CC_ALGORITHMS, LOAD_BALANCERS, install

__all__ = [
    "CC_ALGORITHMS",
    "LOAD_BALANCERS",
    "Bitmap",
    "Ccc",
    "CcConfig",
    "CreditScheduler",
    "CreditSender",
    "Nscc",
    "Oblivious",
    "Reps",
    "Single",
    "install",
]

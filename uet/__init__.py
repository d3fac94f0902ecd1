"""Ultra Ethernet Transport (UET) reference implementation.

Sublayers live in :mod:`uet.wire` (byte layouts), :mod:`uet.pds` (packet delivery),
:mod:`uet.ses` (semantics), :mod:`uet.cc` (congestion control) and :mod:`uet.tss` (security);
:class:`Endpoint` (:mod:`uet.endpoint`) is the public async API::

    from uet import Endpoint, Access, AmoOp, AmoType, ReturnCode, UetError

The API names are imported lazily (PEP 562), so ``import uet.wire`` stays cheap and free of
import cycles.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from uet.finder import install as _install_finder

_install_finder()  # the package's modules found without the path search (uet.finder)

if os.environ.get("UET_COMPILED", "0") not in ("", "0"):  # before any module it covers (uet.compiled)
    from uet.compiled import enable as _enable_compiled

    _enable_compiled()

from uet.dataclass_cache import install as _install_dataclass_cache  # noqa: E402 - after the finders
from uet.errors import DecodeError, EncodeError, UetError  # noqa: E402
from uet.lazy import lazy_names  # noqa: E402

_install_dataclass_cache()  # before the package's first dataclass (uet.dataclass_cache)

if TYPE_CHECKING:  # pragma: no cover
    from uet.endpoint import DeliveryError, Endpoint, EndpointClosed, EndpointConfig, Message, Peer, Receive
    from uet.pds import Mode
    from uet.ses.errors import SesError
    from uet.ses.memory import Access, MemoryRegion
    from uet.wire.ses import AmoOp, AmoType, ReturnCode

_LAZY = {
    "Access": "uet.ses.memory",
    "AmoOp": "uet.wire.ses",
    "AmoType": "uet.wire.ses",
    "DeliveryError": "uet.endpoint",
    "Endpoint": "uet.endpoint",
    "EndpointClosed": "uet.endpoint",
    "EndpointConfig": "uet.endpoint",
    "MemoryRegion": "uet.ses.memory",
    "Message": "uet.endpoint",
    "Mode": "uet.pds",
    "Peer": "uet.endpoint",
    "Receive": "uet.endpoint",
    "ReturnCode": "uet.wire.ses",
    "SesError": "uet.ses.errors",
}

__all__ = [
    "Access",
    "AmoOp",
    "AmoType",
    "DecodeError",
    "DeliveryError",
    "EncodeError",
    "Endpoint",
    "EndpointClosed",
    "EndpointConfig",
    "MemoryRegion",
    "Message",
    "Mode",
    "Peer",
    "Receive",
    "ReturnCode",
    "SesError",
    "UetError",
]
__version__ = "0.1.0"


__getattr__, __dir__ = lazy_names(__name__, _LAZY)

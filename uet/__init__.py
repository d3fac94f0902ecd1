"""Ultra Ethernet Transport (UET) reference implementation.

Sublayers live in :mod:`uet.wire` (byte layouts), :mod:`uet.pds` (packet delivery),
:mod:`uet.ses` (semantics), :mod:`uet.cc` (congestion control) and :mod:`uet.tss` (security).
"""

from uet.errors import DecodeError, EncodeError, UetError

__all__ = ["DecodeError", "EncodeError", "UetError"]
__version__ = "0.1.0"

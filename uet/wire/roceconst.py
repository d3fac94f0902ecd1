"""The RoCEv2 numbers a queue pair's configuration needs (spec/rocev2-and-fabric.md §1.1, §1.4),
apart from the header codecs of :mod:`uet.wire.roce`, which offers them too: every run derives a
RoCEv2 configuration (:mod:`uet.roce.config`), and a UET run then need not build the codecs (two
enums and eight layouts, 4.4 M instructions)."""

from __future__ import annotations

__all__ = ["DSCP_CNP", "DSCP_DATA", "PMTUS"]

#: Path MTUs RoCE allows (§1.1).
PMTUS = (256, 512, 1024, 2048, 4096)
#: DSCP of RoCE data/ACK traffic and of CNPs (§1.4 Decision).
DSCP_DATA = 26
DSCP_CNP = 48

"""Fused layouts for the hottest packets of the data path.

A data packet always carries a PDS request header immediately followed by an SES request header;
encoding or decoding them as one :class:`~uet.wire.layout.Layout` costs one ``struct`` call and
one Python frame instead of two of each. These layouts are built from the very same item lists as
the separate headers (``Layout.concat``), so they cannot drift from them; the property tests
check that a fused encoding equals the concatenation of the separate ones.

Field names follow the parts; the SES fields that collide with PDS names get an ``ses_`` prefix
(``ses_flags``).
"""

from __future__ import annotations

from uet.wire import pds, ses
from uet.wire.layout import Layout

#: RUD/ROD request (SYN = 0) + SES standard request, first packet of a message (SOM = 1).
REQ_STD_SOM = Layout.concat("rud_request+ses_standard_som", pds.REQUEST, ses.STANDARD[(1, "none")])
#: RUD/ROD request (SYN = 0) + SES standard request, later packets (SOM = 0).
REQ_STD = Layout.concat("rud_request+ses_standard", pds.REQUEST, ses.STANDARD[(0, "none")])
#: RUD/ROD request with SYN + SES standard request, SOM = 1 / SOM = 0.
REQ_SYN_STD_SOM = Layout.concat("rud_request_syn+ses_standard_som", pds.REQUEST_SYN, ses.STANDARD[(1, "none")])
REQ_SYN_STD = Layout.concat("rud_request_syn+ses_standard", pds.REQUEST_SYN, ses.STANDARD[(0, "none")])
#: ACK + SES response: what a target sends back for a message's last packet.
ACK_RESPONSE = Layout.concat("ack+ses_response", pds.ACK, ses.RESPONSE)

ALL_LAYOUTS = [REQ_STD_SOM, REQ_STD, REQ_SYN_STD_SOM, REQ_SYN_STD, ACK_RESPONSE]
#: The parts each fused layout is made of, in order (for tests and documentation).
PARTS = {
    REQ_STD_SOM.name: (pds.REQUEST, ses.STANDARD[(1, "none")]),
    REQ_STD.name: (pds.REQUEST, ses.STANDARD[(0, "none")]),
    REQ_SYN_STD_SOM.name: (pds.REQUEST_SYN, ses.STANDARD[(1, "none")]),
    REQ_SYN_STD.name: (pds.REQUEST_SYN, ses.STANDARD[(0, "none")]),
    ACK_RESPONSE.name: (pds.ACK, ses.RESPONSE),
}

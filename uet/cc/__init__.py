"""Congestion control contexts (NSCC, RCCC, multipath entropy): not written yet.

The PDS core asks a gate object before each transmission and tells it every ACK, NACK and
timeout (``uet.pds.seams``); today that gate is a fixed window, the ``none`` algorithm.
"""

"""The live engine: a scenario run by real processes on this machine (or on given hosts).

``uet-run`` (:mod:`uet.tools.run`) parses and prints; this package runs. One switch process
(``uet-fabric``: every switch of the topology) and one endpoint process per rank
(:mod:`uet.live.worker`), all on one time-dilated clock (:mod:`uet.live.dilation`,
:class:`uet.clock.DilatedClock`). It is the asyncio driver of processes: it starts them, hands
them their settings, collects their JSON-line reports and builds the result; every protocol
decision stays in the cores the processes run.
"""

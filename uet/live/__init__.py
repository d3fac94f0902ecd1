"""The live engine: a scenario run by real processes on this machine (or on given hosts).

``uet-run`` (:mod:`uet.tools.run`) parses and prints; this package runs. One switch process
(``uet-fabric``: every switch of the topology) and one endpoint process per rank
(:mod:`uet.live.worker`), all on one time-dilated clock (:mod:`uet.live.dilation`,
:class:`uet.clock.DilatedClock`). It is the asyncio driver of processes: it starts them, hands
them their settings, collects their JSON-line reports and builds the result; every protocol
decision stays in the cores the processes run.

* :mod:`uet.live.launcher`: one run (:class:`~uet.live.launcher.Launcher`);
* :mod:`uet.live.process`: the child processes, each in its own process group;
* :mod:`uet.live.result`: what a result says beyond its flows (settings, CPU starvation);
* :mod:`uet.live.runs`: whole runs per transport, without output (``uet-bench differential``);
* :mod:`uet.live.hosts`: ``uet-run --hosts``, the ranks on real addresses, no software switch.
* :mod:`uet.live.switch`: the switch process (``uet-fabric``), checked and run until a signal.

Nothing is imported here: an endpoint process (``python -m uet.live.worker``) starts without the
launcher's imports.
"""

"""The software switch (architecture.md, rocev2-and-fabric.md §8): ``uet.fabric.model`` holds the
sans-I/O switch and fabric model, ``uet.fabric.topology`` the topology descriptions,
``uet.fabric.switch`` the asyncio process (``uet-fabric``) that runs a whole fabric in real time
behind one UDP socket per host port, with ``profiles`` (real-time parameters, TOML loading),
``timers`` (its deadline timer) and ``telemetry_io`` (JSON lines, plots, pcap taps)."""

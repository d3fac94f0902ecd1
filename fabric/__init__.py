"""The software switch (ARCHITECTURE.md, rocev2-and-fabric.md §8): ``uet.fabric.model`` holds the
sans-I/O switch and fabric model, ``uet.fabric.topology`` the topology descriptions; the asyncio
switch process that carries the model's frames over UDP sockets comes later."""

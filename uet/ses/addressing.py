"""Target-side addressing: processes, resource indices, generations (spec/behaviour.md §1.1–1.2, §6.3).

A FEP hosts processes (``PIDonFEP``, 12 bits), each belonging to one job (JobID, 24 bits); a process
exposes resources (resource index, 12 bits; a libfabric endpoint or service) and each resource has
an 8-bit generation that changes when the index is reconfigured, so stale requests are refused.
Each resource owns its receive queues (:class:`~uet.ses.matching.Matcher`).

Resolution of a request (§6.3 steps 2 and 4), with the codes chosen where the notes list several
(our reading, consistent with §1.2 and the return-code table §6.9):

* **relative addressing** (``REL`` set): the PIDonFEP is interpreted within the request's job.
  JobID unknown at this FEP → ``BAD_JOB_ID``; PID unknown → ``BAD_PID``; PID belonging to another
  job → ``BAD_JOB_ID``; resource index not configured → ``BAD_INDEX``.
* **absolute addressing** (``REL`` clear): any JobID is accepted (authorisation is per memory
  region or receive buffer); an unknown ``(PIDonFEP, RI)`` → ``UNDELIVERABLE``.
* then, for the packet that opens a message: generation disabled → ``DISABLED_GEN``; generation
  mismatch → ``BAD_GENERATION`` carrying the current generation; resource disabled (its receive
  completion queue is down) → ``DISABLED``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.ses.errors import (
    BadGeneration,
    BadIndex,
    BadJobId,
    BadPid,
    Disabled,
    DisabledGen,
    RegistrationError,
    Undeliverable,
)
from uet.ses.matching import Matcher, MatchLimits

__all__ = ["Resource", "ResourceTable"]


@dataclass(eq=False)
class Resource:
    """One resource-index entry of a process: its generation, state and receive queues."""

    pid: int
    index: int
    job_id: int
    generation: int = 0
    #: False when the resource's receive completion queue is down (→ ``DISABLED``)
    enabled: bool = True
    #: False after an unmatched ROD message until a receive is posted (→ ``DISABLED_GEN``, §6.4)
    gen_enabled: bool = True
    matcher: Matcher = field(default_factory=Matcher)


class ResourceTable:
    """The processes and resources of one FEP, and request resolution (§1.2, §6.3)."""

    def __init__(self, limits: MatchLimits | None = None) -> None:
        self._limits = limits or MatchLimits()
        self._pid_job: dict[int, int] = {}
        self._jobs: dict[int, int] = {}  # job -> number of processes
        self._res: dict[tuple[int, int], Resource] = {}

    def add(self, pid: int, index: int, job_id: int, *, generation: int = 0) -> Resource:
        """Configure resource ``index`` of process ``pid`` (creating the process in ``job_id``)."""
        if not (0 <= pid < 1 << 12 and 0 <= index < 1 << 12 and 0 <= job_id < 1 << 24 and 0 <= generation < 256):
            raise RegistrationError("pid/index are 12-bit, job 24-bit, generation 8-bit")
        known = self._pid_job.get(pid)
        if known is not None and known != job_id:
            raise RegistrationError(f"pid {pid} belongs to job {known}")
        if (pid, index) in self._res:
            raise RegistrationError(f"resource ({pid}, {index}) already configured")
        if known is None:
            self._pid_job[pid] = job_id
            self._jobs[job_id] = self._jobs.get(job_id, 0) + 1
        r = Resource(pid, index, job_id, generation, matcher=Matcher(self._limits))
        self._res[(pid, index)] = r
        return r

    def remove(self, pid: int, index: int) -> None:
        """Unconfigure a resource index (later requests → ``BAD_INDEX``/``UNDELIVERABLE``)."""
        self._res.pop((pid, index))
        if not any(p == pid for p, _ in self._res):
            job = self._pid_job.pop(pid)
            self._jobs[job] -= 1
            if not self._jobs[job]:
                del self._jobs[job]

    def reconfigure(self, pid: int, index: int) -> Resource:
        """Give a resource index a fresh generation and empty queues; requests still using the old
        generation get ``BAD_GENERATION`` with the new one (§6.3 step 4)."""
        old = self._res[(pid, index)]
        r = Resource(pid, index, old.job_id, (old.generation + 1) & 0xFF, matcher=Matcher(self._limits))
        self._res[(pid, index)] = r
        return r

    def get(self, pid: int, index: int) -> Resource | None:
        return self._res.get((pid, index))

    def resolve(self, *, rel: bool, job_id: int, pid: int, index: int) -> Resource:
        """§6.3 step 2: the resource a request addresses, or the :class:`SesError` to answer."""
        if rel:
            if job_id not in self._jobs:
                raise BadJobId(f"job {job_id:#x} unknown at this FEP")
            pjob = self._pid_job.get(pid)
            if pjob is None:
                raise BadPid(f"pid {pid} unknown")
            if pjob != job_id:
                raise BadJobId(f"pid {pid} is not in job {job_id:#x}")
            r = self._res.get((pid, index))
            if r is None:
                raise BadIndex(f"resource index {index} not configured for pid {pid}")
            return r
        r = self._res.get((pid, index))
        if r is None:
            raise Undeliverable(f"no endpoint at (pid {pid}, index {index})")
        return r

    @staticmethod
    def check_generation(res: Resource, generation: int) -> None:
        """§6.3 step 4 for the packet that opens a message."""
        if not res.gen_enabled:
            raise DisabledGen(f"generation of ({res.pid}, {res.index}) disabled", generation=res.generation)
        if generation != res.generation:
            raise BadGeneration(f"generation {generation} != {res.generation}", generation=res.generation)
        if not res.enabled:
            raise Disabled(f"resource ({res.pid}, {res.index}) disabled")

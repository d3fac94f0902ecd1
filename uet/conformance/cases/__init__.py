"""The conformance cases, one module per area (importing this package registers them all)."""

from uet.conformance.cases import (  # noqa: F401 - imported for registration
    ack,
    atomics,
    control,
    crc,
    establish,
    initiator,
    modes,
    nacks,
    reads,
    robust,
    ses,
    tss,
)

#: the order areas are run and listed in (spec order: PDS, then SES, then TSS, robustness; the
#: initiator-side cases, which need an agent, come after the target-side ones)
AREA_ORDER = [
    "establish", "window", "ack", "clear", "nack", "control", "rod", "rudi", "uud",
    "ses-opcode", "ses-rc", "ses-match", "ses-rma", "ses-read", "ses-defer", "ses-rndv", "atomic", "tss", "crc",
    "robust", "initiator",
]  # fmt: skip

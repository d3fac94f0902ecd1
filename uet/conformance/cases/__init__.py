"""The conformance cases, one module per area (importing this package registers them all)."""

from uet.conformance.cases import (  # noqa: F401 - imported for registration
    establish,
)

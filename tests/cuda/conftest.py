"""The CUDA tests reuse the integration suite's real-daemon harness: that conftest is loaded by path, once."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_INTEGRATION = Path(__file__).parents[1] / "integration" / "conftest.py"
_specification = importlib.util.spec_from_file_location("integration_conftest", _INTEGRATION)
_integration = importlib.util.module_from_spec(_specification)
_specification.loader.exec_module(_integration)

harness = _integration.harness

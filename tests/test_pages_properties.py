"""Property tests of the state machine (P4, P5, P11) and of rendering the states it reaches (P6).

Random instruction sequences over random logic trees: no illegal state is ever reached, every
fault leaves the state untouched, round ends leave no draft and no idle Unpacked page, and every
reachable state renders to a valid document with render -> parse -> render identical.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from zoom_machine import ZoomMachine

ZoomMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
TestZoomMachine = pytest.mark.slow(ZoomMachine.TestCase)

"""neon's top-level names that its scripts and tests import (issue 17)."""
import logging

import neonlike


def test_logger_displays_at_neons_display_level(caplog):
    from neonlike import logger
    assert logger is neonlike.logger and logger.name == "neonlike"
    with caplog.at_level(logging.ERROR, logger="neonlike"):
        logger.display("epsilon %e", 1e-3)
    assert [(r.levelno, r.levelname, r.getMessage()) for r in caplog.records] == \
        [(41, "DISPLAY", "epsilon 1.000000e-03")]
    assert not hasattr(logging.getLogger("elsewhere"), "display")   # no global patch

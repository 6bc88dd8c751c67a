"""The HTML report of a run set (see :mod:`nightjar.report.page` for its layout)."""

from nightjar.report.page import build_page, write_report

__all__ = ["build_page", "write_report"]

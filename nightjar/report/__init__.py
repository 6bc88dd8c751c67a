"""What people read: the HTML report of a run set (:mod:`nightjar.report.page` lays it out),
the terminal tables, sparklines and progress bars.

Nothing is re-exported here, so that a terminal table never imports plotly.
"""

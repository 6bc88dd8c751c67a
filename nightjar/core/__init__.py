"""The step contract both engines share: what a policy sees and returns each step, the
step driver that runs that sequence, the memory controller, admission and arrivals.

Imports neither engine (``nightjar.sim``, ``nightjar.live``) nor pandas or plotly at
module level; every other family builds on it.
"""

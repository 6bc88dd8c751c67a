"""Calibration of the roofline: operator costs fitted to measured kernel times
(``ops``, ``fitted``) and the host-side overheads with their sources (``overheads``).
"""

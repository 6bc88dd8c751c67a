"""``nightjar sweep``: grids of simulator runs, on local processes or a Ray cluster.

- :mod:`~nightjar.sweep.spec`: the grid (flags or TOML), validated and expanded;
- :mod:`~nightjar.sweep.cell`: one cell's identity and the pure function running it;
- :mod:`~nightjar.sweep.backends`: local processes or Ray;
- :mod:`~nightjar.sweep.store`: atomic cell files and the table;
- :mod:`~nightjar.sweep.run`: the resumable driver;
- :mod:`~nightjar.sweep.figures` / :mod:`~nightjar.sweep.report`: curves with 95% bands.
"""

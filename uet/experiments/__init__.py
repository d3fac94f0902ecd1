"""Experiments built on the engines: logic that tools print, kept out of the command modules.

* :mod:`uet.experiments.sweep` — a sweep file expanded into ``uet-sim`` runs, executed by local
  processes or a Dask cluster, aggregated over seeds.
"""

"""Experiments built on the engines: logic that tools print, kept out of the command modules.

* :mod:`uet.experiments.sweep` — a sweep file expanded into ``uet-sim`` runs, executed by local
  processes or a Dask cluster, aggregated over seeds.
* :mod:`uet.experiments.compare` — one run's result reduced to the §9.1 figures, UET beside RoCEv2.
* :mod:`uet.experiments.roce` — the §9.2 experiments and the checks of their expected outcomes
  (``python -m uet.tools.roce_experiments``).
* :mod:`uet.experiments.cc_suite` — the figures of one row of ``uet-sim --suite cc`` against
  uet-htsim's.
* :mod:`uet.experiments.differential` — the live/sim bar: the live engine's FCT against the
  simulator's spread, the same winner (``uet-bench differential``, ``uet-run --transport both``).
* :mod:`uet.experiments.lb_compare` — one scenario under several load balancers and seeds
  (``uet-sim --compare-lb``).
* :mod:`uet.experiments.dcqcn` — DCQCN's two-flow convergence (``python -m uet.tools.dcqcn_plot``).
* :mod:`uet.experiments.mutants` — single-point mutants of a module's syntax tree (``uet-mutate``,
  ``python -m uet.tools.mutate``).
* :mod:`uet.experiments.mutation` — those mutants run against the tests that cover the module,
  classified and scored (``python -m uet.tools.mutate``).
* :mod:`uet.experiments.impair_matrix` — two PDS cores on a seeded lossy link, per mode, loss rate
  and seed (``uet-bench matrix``).
* :mod:`uet.experiments.ecmp` — the worst link's flow count under our ECMP against uniformly random
  upward hops (``python -m uet.tools.ecmp_check``).
"""

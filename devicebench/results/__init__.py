"""Figures derived from stored runs, for the report and for cross-run comparison.

- :mod:`devicebench.results.run_report`: one run (and the machine's latest op sweep)
  -> :class:`RunReport`, the data every report renderer (HTML, markdown, JSON) formats.
- :mod:`devicebench.results.compare`: the same workload and configuration in two runs
  (or on two machines) -> ratios of medians with CIs from independent resampling.

This layer computes; ``report/`` only formats. It reads the store and never prints.
"""

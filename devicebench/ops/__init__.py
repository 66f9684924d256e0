"""The op micro-benchmark (``devicebench ops``): seed 003's CPU-vs-accelerator loop done
right — warm-up, a device sync inside every timed block, naive / eager / compiled /
in-graph loops, a size sweep, a cost model per path and the crossover size.

Layout: :mod:`spec` (ops, modes, sizes, work), :mod:`kernels` (one module per backend,
worker side), :mod:`worker` (the timed protocol), :mod:`runner` (one worker process per
backend and device), :mod:`fit` and :mod:`analysis` (the cost model, speed-ups,
verdicts). Only the worker side imports a framework.
"""

"""Workloads for bench/accuracy.py: mnist-cnn cut to its first SAMPLES samples (the
environment variable DEVICEBENCH_BENCH_SAMPLES, default all 60,000), so devicebench and
the plain seed 001 script train on the same data of the same size.

Used as ``bench/accuracy_workloads.py:mnist_subset``."""

from __future__ import annotations

import dataclasses
import os

from devicebench.workloads import mnist_cnn
from devicebench.workloads.base import TrainData, Workload

SAMPLES_ENV = "DEVICEBENCH_BENCH_SAMPLES"


def mnist_subset() -> Workload:
    samples = int(os.environ.get(SAMPLES_ENV, mnist_cnn.SAMPLES))

    def make_data(seed: int) -> TrainData:
        d = mnist_cnn.make_data(seed)
        return TrainData(d.x[:samples], d.y[:samples], note=f"{d.note}, first {samples}")

    return dataclasses.replace(mnist_cnn.WORKLOAD, name="mnist-cnn-subset",
                               make_data=make_data)

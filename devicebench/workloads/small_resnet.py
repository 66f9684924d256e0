"""``small-resnet``: a CIFAR-shaped ResNet (stem + 3 residual blocks, BatchNorm).

Convolution-bound with BatchNorm and residual adds: the layer mix of real vision models at a
size a CPU step takes a fraction of a second.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devicebench.workloads.base import TrainData, Workload

SIDE = 32
CHANNELS = 3
CLASSES = 10
STEM = 16
BLOCKS = ((16, 1), (32, 2), (64, 2))  # (filters, stride): 32x32x16 -> 16x16x32 -> 8x8x64
SAMPLES = 5_000
BATCH = 64
TRAIN_FACTOR = 3  # forward + backward ≈ 3x forward
BN_FLOPS = 4  # per element: normalise (sub, mul) + scale + shift


def conv2d_flops(kernel: int, c_in: int, c_out: int, h_out: int, w_out: int) -> int:
    """``2·K·K·Cin·Cout·Hout·Wout`` (a multiply-add is 2 FLOPs; no bias before BatchNorm)."""
    return 2 * kernel * kernel * c_in * c_out * h_out * w_out


def dense_flops(n_in: int, n_out: int) -> int:
    """``2·in·out``."""
    return 2 * n_in * n_out


def forward_flops() -> int:
    """Stem conv+BN+relu; per block 2 convs + 2 BN + 2 relu + add (+ 1x1 conv + BN shortcut
    when it changes shape); global average pool; dense + bias/softmax."""
    side = SIDE
    total = conv2d_flops(3, CHANNELS, STEM, side, side) + (BN_FLOPS + 1) * side * side * STEM
    c_in = STEM
    for filters, stride in BLOCKS:
        side //= stride
        elems = side * side * filters
        total += conv2d_flops(3, c_in, filters, side, side)
        total += conv2d_flops(3, filters, filters, side, side)
        total += 2 * BN_FLOPS * elems + 2 * elems + elems  # 2 BN, 2 relu, residual add
        if stride != 1 or c_in != filters:
            total += conv2d_flops(1, c_in, filters, side, side) + BN_FLOPS * elems
        c_in = filters
    total += side * side * c_in  # global average pool
    total += dense_flops(c_in, CLASSES) + 2 * CLASSES  # + bias, softmax
    return total


def training_flops_per_sample() -> float:
    return float(TRAIN_FACTOR * forward_flops())


def make_data(seed: int) -> TrainData:
    """A fixed coloured 4x4-block pattern per class, random brightness, plus pixel noise."""
    templates = np.random.RandomState(2024).rand(CLASSES, 4, 4, CHANNELS)  # the task, fixed
    templates = templates.repeat(SIDE // 4, axis=1).repeat(SIDE // 4, axis=2).astype(np.float32)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, size=SAMPLES).astype(np.int32)
    brightness = rng.uniform(0.7, 1.0, size=(SAMPLES, 1, 1, 1)).astype(np.float32)
    noise = rng.random((SAMPLES, SIDE, SIDE, CHANNELS), dtype=np.float32)
    x = 0.2 * templates[y] * brightness + 0.8 * noise
    return TrainData(
        x=x.astype(np.float32), y=y, note=f"synthetic {SAMPLES}x{SIDE}x{SIDE}x{CHANNELS} images"
    )


def build_model(keras: Any) -> Any:
    layers = keras.layers

    def conv_bn(x: Any, filters: int, kernel: int, stride: int) -> Any:
        x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
        return layers.BatchNormalization()(x)

    inputs = keras.Input(shape=(SIDE, SIDE, CHANNELS))
    x = layers.Activation("relu")(conv_bn(inputs, STEM, 3, 1))
    c_in = STEM
    for filters, stride in BLOCKS:
        shortcut = x
        if stride != 1 or c_in != filters:
            shortcut = conv_bn(x, filters, 1, stride)
        h = layers.Activation("relu")(conv_bn(x, filters, 3, stride))
        h = conv_bn(h, filters, 3, 1)
        x = layers.Activation("relu")(layers.Add()([h, shortcut]))
        c_in = filters
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="small_resnet")


def optimizer(keras: Any) -> Any:
    return keras.optimizers.Adam()


WORKLOAD = Workload(
    name="small-resnet",
    description="CIFAR-shaped ResNet: conv stem 16 + 3 residual blocks (16/32/64) with BatchNorm",
    build_model=build_model,
    make_data=make_data,
    loss="sparse_categorical_crossentropy",
    optimizer=optimizer,
    batch_size=BATCH,
    flops_per_sample=training_flops_per_sample(),
    params={
        "layers": "Conv(16)+BN stem - ResBlock(16) - ResBlock(32, /2) - ResBlock(64, /2) - "
        "GlobalAvgPool - Dense(10, softmax)",
        "input": "(32, 32, 3) float32 in [0, 1]",
        "classes": CLASSES,
        "samples": SAMPLES,
        "batch_size": BATCH,
        "optimizer": "Adam()",
        "loss": "sparse_categorical_crossentropy",
        "metrics": "accuracy",
        "data": "synthetic class colour patterns + noise, seeded",
    },
    metrics=("accuracy",),
    default_seed=0,
)

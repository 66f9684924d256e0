"""``tiny-transformer``: one post-norm Transformer encoder block classifying token sequences.

Embedding + learned position embedding, 2-head self-attention, FFN(128), average pool,
Dense(2). The label says whether "positive" tokens outnumber "negative" ones, so the
task is learnable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devicebench.workloads.base import TrainData, Workload

VOCAB = 2_000
SEQ_LEN = 64
EMBED = 64
HEADS = 2
KEY_DIM = 32
FF = 128
CLASSES = 2
SAMPLES = 4_000
BATCH = 32
LEARNING_RATE = 1e-3
TRAIN_FACTOR = 3  # forward + backward ≈ 3x forward
LN_FLOPS = 5  # per element: mean, variance, normalise, scale, shift
SOFTMAX_FLOPS = 3  # per score: exp, sum, divide

POSITIVE = range(1, 51)  # token ids whose majority makes label 1
NEGATIVE = range(51, 101)  # token ids whose majority makes label 0
NEUTRAL_START = 101  # everything from here to VOCAB - 1 is filler
MAX_MARKED = 8  # up to 8 positive and 8 negative tokens per sequence


def dense_flops(tokens: int, n_in: int, n_out: int) -> int:
    """``2·in·out`` per token plus ``out`` for the bias."""
    return tokens * (2 * n_in * n_out + n_out)


def attention_flops(length: int, d_model: int, heads: int, key_dim: int) -> int:
    """Q, K, V and output projections plus ``2·L·L·dk`` per head for the scores and again
    for the weighted sum, plus the softmax."""
    inner = heads * key_dim
    projections = 3 * dense_flops(length, d_model, inner) + dense_flops(length, inner, d_model)
    scores = 2 * heads * length * length * key_dim
    weighted_sum = 2 * heads * length * length * key_dim
    softmax = SOFTMAX_FLOPS * heads * length * length
    return projections + scores + weighted_sum + softmax


def forward_flops() -> int:
    elems = SEQ_LEN * EMBED
    return (
        elems  # token + position embedding add (lookups are gathers, 0 FLOPs)
        + attention_flops(SEQ_LEN, EMBED, HEADS, KEY_DIM)
        + elems
        + LN_FLOPS * elems  # residual add + LayerNorm
        + dense_flops(SEQ_LEN, EMBED, FF)
        + SEQ_LEN * FF  # FFN in + relu
        + dense_flops(SEQ_LEN, FF, EMBED)  # FFN out
        + elems
        + LN_FLOPS * elems  # residual add + LayerNorm
        + elems  # global average pool
        + dense_flops(1, EMBED, CLASSES)
        + CLASSES  # classifier + softmax
    )


def training_flops_per_sample() -> float:
    return float(TRAIN_FACTOR * forward_flops())


def make_data(seed: int) -> TrainData:
    """Filler tokens with ``a`` positive and ``b`` negative tokens (a != b) at random places;
    label = 1 when a > b."""
    rng = np.random.default_rng(seed)
    x = rng.integers(NEUTRAL_START, VOCAB, size=(SAMPLES, SEQ_LEN))
    n_pos = rng.integers(0, MAX_MARKED + 1, size=SAMPLES)
    n_neg = rng.integers(0, MAX_MARKED + 1, size=SAMPLES)
    n_pos = np.where(n_pos == n_neg, n_pos + 1, n_pos)  # no ties: every label is decided
    # Rank of each position in a random permutation per row: the first n_pos ranks get a
    # positive token, the next n_neg a negative one.
    rank = np.argsort(np.argsort(rng.random((SAMPLES, SEQ_LEN)), axis=1), axis=1)
    pos_tokens = rng.integers(POSITIVE.start, POSITIVE.stop, size=(SAMPLES, SEQ_LEN))
    neg_tokens = rng.integers(NEGATIVE.start, NEGATIVE.stop, size=(SAMPLES, SEQ_LEN))
    is_pos = rank < n_pos[:, None]
    is_neg = (rank >= n_pos[:, None]) & (rank < (n_pos + n_neg)[:, None])
    x = np.where(is_pos, pos_tokens, np.where(is_neg, neg_tokens, x)).astype(np.int32)
    y = (n_pos > n_neg).astype(np.int32)
    note = f"synthetic {SAMPLES}x{SEQ_LEN} token ids (vocab {VOCAB}), label = majority class"
    return TrainData(x=x, y=y, note=note)


def build_model(keras: Any) -> Any:
    layers, ops = keras.layers, keras.ops
    tokens = keras.Input(shape=(SEQ_LEN,), dtype="int32")
    # Position ids 0..L-1 derived from the input, so they stay symbolic on every backend.
    positions = ops.cumsum(ops.ones_like(tokens), axis=1) - 1
    x = layers.Embedding(VOCAB, EMBED)(tokens) + layers.Embedding(SEQ_LEN, EMBED)(positions)
    attn = layers.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM)(x, x)
    x = layers.LayerNormalization()(layers.Add()([x, attn]))
    ff = layers.Dense(FF, activation="relu")(x)
    ff = layers.Dense(EMBED)(ff)
    x = layers.LayerNormalization()(layers.Add()([x, ff]))
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(tokens, outputs, name="tiny_transformer")


def optimizer(keras: Any) -> Any:
    return keras.optimizers.Adam(learning_rate=LEARNING_RATE)


WORKLOAD = Workload(
    name="tiny-transformer",
    description="One Transformer block (2-head attention, FFN 128) classifying 64-token texts",
    build_model=build_model,
    make_data=make_data,
    loss="sparse_categorical_crossentropy",
    optimizer=optimizer,
    batch_size=BATCH,
    flops_per_sample=training_flops_per_sample(),
    params={
        "layers": "Embedding(2000, 64) + position Embedding(64, 64) - MultiHeadAttention(2 "
        "heads, key_dim 32) - Add+LayerNorm - FFN(128, 64) - Add+LayerNorm - "
        "GlobalAvgPool1D - Dense(2, softmax)",
        "input": "(64,) int32 token ids",
        "vocab": VOCAB,
        "sequence_length": SEQ_LEN,
        "classes": CLASSES,
        "samples": SAMPLES,
        "batch_size": BATCH,
        "optimizer": f"Adam(learning_rate={LEARNING_RATE})",
        "loss": "sparse_categorical_crossentropy",
        "metrics": "accuracy",
        "data": "synthetic tokens; label = positive tokens outnumber negative ones, seeded",
    },
    metrics=("accuracy",),
    default_seed=0,
)

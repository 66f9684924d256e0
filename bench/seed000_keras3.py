"""Seed 000's script, fixed for Keras 3, timed with plain ``model.fit``.

Changes from the original: ``keras.Input(shape=[None, 1])`` instead of ``input_shape=``,
``keras.optimizers.Adam`` instead of the removed ``tf.keras.optimizers.legacy.Adam``, no
validation data (devicebench measures training steps), and a callback that records each
epoch's wall time (epoch hooks only: no per-batch hook, so Keras' async dispatch stays
on). Prints one JSON line: {"epoch_seconds": [...]}.

Usage: KERAS_BACKEND=tensorflow python bench/seed000_keras3.py [EPOCHS]
"""

import json
import sys
import time

import keras
import numpy as np


def generate_time_series(batch_size, n_steps):
    freq1, freq2, offsets1, offsets2 = np.random.rand(4, batch_size, 1)
    time_ = np.linspace(0, 1, n_steps)
    series = 0.5 * np.sin((time_ - offsets1) * (freq1 * 10 + 10))
    series += 0.2 * np.sin((time_ - offsets2) * (freq2 * 20 + 20))
    series += 0.1 * (np.random.rand(batch_size, n_steps) - 0.5)
    return series[..., np.newaxis].astype(np.float32)


class EpochTimes(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        float(logs["loss"])
        self.times.append(time.perf_counter() - self.t0)


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    np.random.seed(42)
    n_steps = 50
    series = generate_time_series(10000, n_steps + 1)
    x_train, y_train = series[:7000, :n_steps], series[:7000, -1]
    np.random.seed(42)
    keras.utils.set_random_seed(42)
    model = keras.models.Sequential([keras.Input(shape=[None, 1]), keras.layers.SimpleRNN(1)])
    model.compile(loss="mse", optimizer=keras.optimizers.Adam(learning_rate=0.005))
    cb = EpochTimes()
    model.fit(x_train, y_train, epochs=epochs, verbose=0, callbacks=[cb])
    print(json.dumps({"epoch_seconds": cb.times}))


if __name__ == "__main__":
    main()

"""Seed 000's script as its author wrote it, fixed for Keras 3, timed two ways.

Changes from the original: ``keras.Input(shape=[None, 1])`` instead of ``input_shape=``,
``keras.optimizers.Adam`` instead of the removed ``tf.keras.optimizers.legacy.Adam``, and
``verbose=0`` unless ``--verbose 1`` (the author's default progress bar). Validation on
the 2,000-sample ``(X_valid, y_valid)`` at every epoch end, as written. Timed by a
callback (each epoch's wall time, epoch hooks only: Keras' async dispatch stays on; an
epoch ends after its validation pass) and by a stopwatch around the whole ``fit``.
Prints one JSON line: {"epoch_seconds": [...], "fit_seconds": T}.

Usage: KERAS_BACKEND=tensorflow python bench/seed000_keras3.py [EPOCHS] [--verbose 0|1]
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
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    epochs = int(args[0]) if args else 20
    verbose = int(sys.argv[sys.argv.index("--verbose") + 1]) if "--verbose" in sys.argv else 0
    np.random.seed(42)
    n_steps = 50
    series = generate_time_series(10000, n_steps + 1)
    X_train, y_train = series[:7000, :n_steps], series[:7000, -1]  # noqa: N806 (the seed's names)
    X_valid, y_valid = series[7000:9000, :n_steps], series[7000:9000, -1]  # noqa: N806
    np.random.seed(42)
    keras.utils.set_random_seed(42)
    model = keras.models.Sequential([keras.Input(shape=[None, 1]), keras.layers.SimpleRNN(1)])
    model.compile(loss="mse", optimizer=keras.optimizers.Adam(learning_rate=0.005))
    cb = EpochTimes()
    start = time.perf_counter()
    model.fit(X_train, y_train, epochs=epochs, validation_data=(X_valid, y_valid),
              verbose=verbose, callbacks=[cb])
    fit_seconds = time.perf_counter() - start
    print(json.dumps({"epoch_seconds": cb.times, "fit_seconds": fit_seconds}))


if __name__ == "__main__":
    main()

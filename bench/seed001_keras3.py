"""Seed 001's MNIST CNN as its author wrote it (Keras 3), timed two ways.

The seed's model, ``compile(optimizer='adam', loss='sparse_categorical_crossentropy',
metrics=['accuracy'])`` and ``fit(train_images, train_labels, epochs=5, batch_size=256)``
(no validation: the seed drops the test set), with a stopwatch around ``fit`` as the seed
has (``time.time()``; here ``perf_counter``) and a callback timing each epoch. Changes:
``keras.Input`` instead of ``input_shape=``; the data comes from devicebench's mnist-cnn
workload (real MNIST if in the Keras cache, never downloaded; else its synthetic digits)
and may be cut to its first SAMPLES (``--samples``; devicebench gets the same cut);
``verbose=0`` unless ``--verbose 1``.
Prints one JSON line: {"epoch_seconds": [...], "fit_seconds": T}.

Usage: KERAS_BACKEND=tensorflow python bench/seed001_keras3.py [EPOCHS] [--samples N]
"""

import json
import sys
import time

import keras
from seed000_keras3 import EpochTimes  # its sibling in bench/

from devicebench.workloads import mnist_cnn


def _opt(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main() -> None:
    args = [a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
    epochs = int(args[0]) if args else 5
    samples = _opt("--samples", mnist_cnn.SAMPLES)
    data = mnist_cnn.make_data(0)
    train_images, train_labels = data.x[:samples], data.y[:samples]
    layers = keras.layers
    model = keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    cb = EpochTimes()
    start = time.perf_counter()
    model.fit(train_images, train_labels, epochs=epochs, batch_size=256,
              verbose=_opt("--verbose", 0), callbacks=[cb])
    fit_seconds = time.perf_counter() - start
    print(json.dumps({"epoch_seconds": cb.times, "fit_seconds": fit_seconds}))


if __name__ == "__main__":
    main()

"""A training script to try devicebench on: the 1-unit SimpleRNN from a forum report
(a Mac Studio M1 Ultra owner's: 140 s per epoch on the Metal GPU, 3-6 s on Colab),
in its Keras 3 form (``keras.Input`` instead of ``input_shape=``, ``keras.optimizers.Adam``
instead of the removed ``tf.keras.optimizers.legacy.Adam``), importing TensorFlow first as
the TensorFlow tutorials do (``from tensorflow import keras``). Its data: the report's own
generator, 7,000 training series of two sine waves plus noise. Try it with:

    devicebench doctor examples/train.py
    devicebench advise examples/train.py
    devicebench monitor -- python examples/train.py --epochs 3
"""

import argparse

import numpy as np
import tensorflow as tf
from tensorflow import keras


def generate_time_series(batch_size: int, n_steps: int) -> np.ndarray:
    """Two sine waves plus noise: the report's data generator."""
    freq1, freq2, offsets1, offsets2 = np.random.rand(4, batch_size, 1)
    time = np.linspace(0, 1, n_steps)
    series = 0.5 * np.sin((time - offsets1) * (freq1 * 10 + 10))
    series += 0.2 * np.sin((time - offsets2) * (freq2 * 20 + 20))
    series += 0.1 * (np.random.rand(batch_size, n_steps) - 0.5)
    return series[..., np.newaxis].astype(np.float32)


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

np.random.seed(42)
n_steps = 50
series = generate_time_series(10000, n_steps + 1)
x_train, y_train = series[:7000, :n_steps], series[:7000, -1]
x_valid, y_valid = series[7000:9000, :n_steps], series[7000:9000, -1]

tf.random.set_seed(42)
model = keras.models.Sequential([keras.Input(shape=[None, 1]), keras.layers.SimpleRNN(1)])
model.compile(loss="mse", optimizer=keras.optimizers.Adam(learning_rate=0.005))
model.fit(x_train, y_train, epochs=args.epochs, validation_data=(x_valid, y_valid))

"""A script written for TensorFlow 1 (issue 24, class 21: findings follow the release the
script is written for, read from the script itself): one finding naming the TF1 API and the
way to run it on TensorFlow 2, not one AttributeError per line; nothing when the script
already uses `tf.compat.v1` or declares TensorFlow 1.x."""

from __future__ import annotations

import textwrap
from pathlib import Path

from devicebench.env.snapshot import EnvSnapshot
from devicebench.script_check import check_script, check_source

TF1 = """\
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets("MNIST_data/", one_hot=True)
x = tf.placeholder(tf.float32, [None, 784])
W = tf.Variable(tf.zeros([784, 10]))
y = tf.nn.softmax(tf.matmul(x, W))
loss = -tf.reduce_sum(tf.log(y))
sess = tf.Session()
sess.run(tf.global_variables_initializer())
tf.config.optimizer.set_jit(True)
"""


def _tf(version: str) -> EnvSnapshot:
    return EnvSnapshot(distributions={"tensorflow": version})


def test_a_tf1_script_gets_one_warning_with_the_compat_v1_way_to_run_it():
    found = check_source(TF1, snapshot=_tf("2.16.1"))
    tf1, = [f for f in found if f.id == "script.tf1-api-on-tf2"]
    assert tf1.severity == "warning" and tf1.location.endswith(":5")
    assert tf1.title.startswith("the script is written for TensorFlow 1: TensorFlow 2.16.1 ")
    assert "`tf.placeholder`, `tf.log`, `tf.Session`, `tf.global_variables_initializer`" in (
        tf1.observed) and "lines 5, 8, 9, 10" in tf1.observed
    assert "tf.keras.datasets.mnist.load_data()" in tf1.observed
    assert "import tensorflow.compat.v1 as tf" in tf1.fix and "disable_v2_behavior" in tf1.fix
    # The names TF1 had are not each an AttributeError finding of their own.
    assert not [f for f in found if f.id == "script.attribute-does-not-exist"]


def test_where_this_machine_runs_tf1_it_says_nothing_and_with_no_tf_known_info():
    assert not [f for f in check_source(TF1, snapshot=_tf("1.15.5"))
                if f.id in ("script.tf1-api-on-tf2", "script.attribute-does-not-exist")]
    tf1, = [f for f in check_source(TF1) if f.id == "script.tf1-api-on-tf2"]
    assert tf1.severity == "info" and "(no TensorFlow installed here)" in tf1.title


def test_names_tf1_never_had_are_still_judged_one_by_one():
    found = check_source("import tensorflow as tf\nx = tf.placeholder(tf.float32)\n"
                         "f = tf.fucntion(lambda: 1)\n")
    ids = sorted((f.id, f.location.rsplit(":", 1)[1]) for f in found)
    assert ("script.attribute-does-not-exist", "3") in ids  # a misspelling, not TF1
    assert ("script.tf1-api-on-tf2", "2") in ids


def test_compat_v1_or_a_declared_tf1_is_judged_as_what_it_is(tmp_path: Path):
    compat = TF1.replace("import tensorflow as tf\n",
                         "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n")
    assert not [f for f in check_source(compat) if f.id in (
        "script.tf1-api-on-tf2", "script.attribute-does-not-exist")]
    (tmp_path / "train.py").write_text(TF1)
    assert [f for f in check_script(tmp_path / "train.py") if f.id == "script.tf1-api-on-tf2"]
    (tmp_path / "requirements.txt").write_text("tensorflow-gpu==1.15.0\nnumpy<1.19\n")
    assert not [f for f in check_script(tmp_path / "train.py")
                if f.id == "script.tf1-api-on-tf2"]
    pep723 = textwrap.dedent("""\
        # /// script
        # dependencies = ["tensorflow<2"]
        # ///
        """) + TF1
    assert not [f for f in check_source(pep723) if f.id == "script.tf1-api-on-tf2"]

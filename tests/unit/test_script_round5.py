"""The script check's fifth round (issue 24): general mechanisms found missing on
round5_dev and the seen sets, each with a case that must stay silent."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_dataset_method_result_dropped() -> None:
    source = """\
        import tensorflow as tf

        def make(dataset, batch_size):
            dataset = dataset.shuffle(1000)
            dataset = dataset.batch(batch_size)
            dataset.prefetch(tf.data.AUTOTUNE)
            return dataset
    """
    assert ids_at(source, "script.result-discarded") == [6]
    kept = source.replace("            dataset.prefetch(",
                          "            dataset = dataset.prefetch(")
    assert ids_at(kept, "script.result-discarded") == []
    plain = source.replace("import tensorflow as tf", "import pandas as tf")
    assert ids_at(plain, "script.result-discarded") == []  # not a tf.data pipeline


def test_compiled_callable_dropped_or_bound_to_self() -> None:
    source = """\
        import torch

        class Net(torch.nn.Module):
            def load(self, path, compile=True):
                self.load_state_dict(torch.load(path))
                if compile:
                    self = torch.compile(self)

        torch.compile(model)
        fast = torch.compile(model)
    """
    assert ids_at(source, "script.result-discarded") == [7, 9]


def test_detect_anomaly_left_on() -> None:
    source = """\
        import torch

        torch.autograd.set_detect_anomaly(True)
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
    """
    assert ids_at(source, "script.detect-anomaly-on", "warning") == [3]
    assert ids_at(source.replace("(True)", "(False)"), "script.detect-anomaly-on") == []
    guarded = source.replace("torch.autograd.set_detect_anomaly(True)",
                             "if args.debug:\n            torch.autograd.set_detect_anomaly(True)")
    assert ids_at(guarded, "script.detect-anomaly-on", "warning") == []
    assert ids_at(guarded, "script.detect-anomaly-on", "info") == [4]


def test_python_generator_feeding_tf_data() -> None:
    source = """\
        import tensorflow as tf

        ds = tf.data.Dataset.from_generator(make_items, output_signature=spec)
        files = tf.data.Dataset.from_tensor_slices(paths).map(tf.io.read_file)
    """
    assert ids_at(source, "script.tfdata-python-in-pipeline", "info") == [3]
    assert ids_at(source.replace("from_generator(make_items, output_signature=spec)",
                                 "range(10)"), "script.tfdata-python-in-pipeline") == []


def test_jit_compile_false_on_the_jax_backend_runs_eagerly() -> None:
    source = """\
        import os
        os.environ["KERAS_BACKEND"] = "jax"
        import keras

        model.compile(optimizer="adam", loss="mse", jit_compile=False)
        model.fit(x, y)
    """
    assert ids_at(source, "script.run-eagerly") == [5]
    tf_backend = source.replace('"jax"', '"tensorflow"')
    assert ids_at(tf_backend, "script.run-eagerly") == []  # still a tf.function graph


def test_item_in_a_compiled_modules_forward() -> None:
    source = """\
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                n = int(x.gt(0).sum().item())
                return self.head(x[:, :n]), self.metric(x)

            def metric(self, x):
                return x.mean().item()

        model = torch.compile(Net().cuda())
        for x in loader:
            out = model(x.cuda())
    """
    assert ids_at(source, "script.graph-break-item") == [5, 9]
    eager = source.replace("torch.compile(Net().cuda())", "Net().cuda()")
    assert ids_at(eager, "script.graph-break-item") == []


def test_mlx_loop_that_never_evaluates() -> None:
    source = """\
        import mlx.core as mx
        import mlx.nn as nn

        loss_and_grad = nn.value_and_grad(model, loss_fn)
        for step in range(1000):
            loss, grads = loss_and_grad(model, x, y)
            optimizer.update(model, grads)
            if step % 100 == 0:
                print(loss.item())
    """
    assert ids_at(source, "script.mlx-no-eval") == [6]
    every_n = source.replace("print(loss.item())", "mx.eval(model.parameters(), optimizer.state)")
    assert ids_at(every_n, "script.mlx-no-eval") == []  # the MLX maintainers' own fix


def test_synchronize_every_training_step() -> None:
    source = """\
        import time
        import torch

        for batch in train_loader:
            t0 = time.time()
            loss = model(batch.cuda()).sum()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            times.append(time.time() - t0)
    """
    assert ids_at(source, "script.sync-in-step-loop") == [9]
    bench = source.replace("for batch in train_loader:", "for _ in range(100):").replace(
        "batch.cuda()", "x")
    assert ids_at(bench, "script.sync-in-step-loop") == []  # a benchmark times each step
    logged = source.replace("            torch.cuda.synchronize()",
                            "            if step % 100 == 0:\n"
                            "                torch.cuda.synchronize()")
    assert ids_at(logged, "script.sync-in-step-loop") == []


def test_tensor_formatted_in_a_loop_inside_the_step() -> None:
    source = """\
        import torch

        for data, labels in loader:
            data, labels = data.to(device), labels.to(device)
            loss = model(data, labels)
            loss.backward()
            optimizer.step()
            for a, p in zip(anchors, positives):
                key = f"{labels[a]}_{labels[p]}"
    """
    assert ids_at(source, "script.sync-in-step-loop") == [9]
    host = source.replace("data, labels = data.to(device), labels.to(device)",
                          "data = data.to(device)")
    assert ids_at(host, "script.sync-in-step-loop") == []  # labels stay on the host


def test_item_per_batch_in_an_evaluation_loop() -> None:
    source = """\
        import torch

        model = Net().to("mps")
        model.eval()
        with torch.no_grad():
            for x, y in test_loader:
                out = model(x.to("mps"))
                correct += (out.argmax(1) == y.to("mps")).sum().item()
    """
    assert ids_at(source, "script.sync-in-step-loop") == [8]
    tensor = source.replace(".sum().item()", ".sum()")
    assert ids_at(tensor, "script.sync-in-step-loop") == []


def test_host_tensor_from_a_helper_or_variable_copied_each_step() -> None:
    source = """\
        import torch

        def grid(h, w):
            ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            return torch.stack([xs, ys]).float()

        class Flow(torch.nn.Module):
            def forward(self, x):
                g = grid(x.shape[2], x.shape[3]).to(x.device)
                d = torch.linspace(-1, 1, 9)
                delta = torch.stack(torch.meshgrid(d, d, indexing="ij")).to(x.device)
                return x + g.sum() + delta.sum()

        model = Flow().cuda()
        for x in loader:
            loss = model(x.cuda()).sum()
            loss.backward()
    """
    assert ids_at(source, "script.per-step-copy") == [9, 11]
    delta_on_device = source.replace("torch.linspace(-1, 1, 9)",
                                     "torch.linspace(-1, 1, 9, device=x.device)")
    assert ids_at(delta_on_device, "script.per-step-copy") == [9]
    on_device = delta_on_device.replace("torch.arange(h)", "torch.arange(h, device='cuda')")
    assert ids_at(on_device, "script.per-step-copy") == []  # one input on the device


def test_submodule_forward_without_no_grad() -> None:
    source = """\
        import torch

        class Mixer:
            def __init__(self, net):
                self.net = net.cuda()

            def predict(self, loader):
                self.net.eval()
                return [self.net(x.cuda()) for x in loader] + [self.net(x) for x in []]

            def predict_loop(self, loader):
                self.net.eval()
                outs = []
                for x in loader:
                    outs.append(self.net(x.cuda()))
                return outs
    """
    assert ids_at(source, "script.inference-grad") == [15]
    guarded = source.replace("                for x in loader:\n",
                             "                with torch.no_grad():\n"
                             "                  for x in loader:\n")
    assert ids_at(guarded, "script.inference-grad") == []

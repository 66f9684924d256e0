"""The script check's rules written against corpus_round10's dev half (issue 24, round 11):
each fires on its form and stays silent on the form its thread recommends (or on code that
runs once)."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_merged_histogram_summaries_fetched_every_step() -> None:
    source = """\
        import tensorflow as tf

        def train(model, loader, sess, writer):
            tf.compat.v1.summary.histogram("logits", model.logits)
            summaries = tf.compat.v1.summary.merge_all()
            for b in range(loader.num_batches):
                summ, _ = sess.run([summaries, model.train_op], loader.feed())
                writer.add_summary(summ, b)
    """
    assert ids_at(source, "script.summary-every-step", "info") == [7]
    every_100 = source.replace(
        "                summ, _ = sess.run([summaries, model.train_op], loader.feed())\n"
        "                writer.add_summary(summ, b)\n",
        "                sess.run(model.train_op, loader.feed())\n"
        "                if b % 100 == 0:\n"
        "                    writer.add_summary(sess.run(summaries, loader.feed()), b)\n")
    assert ids_at(every_100, "script.summary-every-step") == []
    # scalars only (no histogram in the file): the merged op is cheap
    scalars = source.replace('tf.compat.v1.summary.histogram("logits", model.logits)',
                             'tf.compat.v1.summary.scalar("loss", model.loss)')
    assert ids_at(scalars, "script.summary-every-step") == []


def test_tf2_histogram_summary_per_step() -> None:
    source = """\
        import tensorflow as tf

        def train(model, dataset, writer):
            for step, (x, y) in enumerate(dataset):
                grads = model.step(x, y)
                with writer.as_default():
                    tf.summary.scalar("loss", model.loss, step=step)
                    tf.summary.histogram("g0", grads[0], step=step)
    """
    assert ids_at(source, "script.summary-every-step") == [8]
    once = source.replace('tf.summary.histogram("g0", grads[0], step=step)', "pass")
    assert ids_at(once, "script.summary-every-step") == []


def test_cuda_copy_in_dataset_getitem() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Videos(Dataset):
            def __getitem__(self, i):
                return {"video": self.load(self.paths[i]).cuda()}

        for batch in DataLoader(Videos(), batch_size=1):
            model(batch["video"])
    """
    assert ids_at(source, "script.cuda-in-dataset", "warning") == [6]
    in_loop = source.replace('.cuda()}', '}').replace('model(batch["video"])',
                                                      'model(batch["video"].cuda())')
    assert ids_at(in_loop, "script.cuda-in-dataset") == []


def test_loader_over_in_memory_dataset() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader, Dataset

        class InMemory(Dataset):
            def __getitem__(self, i):
                return self.x[i], self.y[i]

        loader = DataLoader(InMemory(), batch_size=4096, shuffle=True)
    """
    assert ids_at(source, "script.per-item-fetch", "info") == [8]
    batched = source.replace("                return self.x[i], self.y[i]\n",
                             "                return self.x[i], self.y[i]\n\n"
                             "            def __getitems__(self, idx):\n"
                             "                return self.x[idx], self.y[idx]\n")
    assert ids_at(batched, "script.per-item-fetch") == []
    from_disk = source.replace("return self.x[i], self.y[i]", "return torch.load(self.f[i])")
    assert ids_at(from_disk, "script.per-item-fetch") == []


def test_cast_after_conversion_per_step() -> None:
    source = """\
        import numpy as np
        import torch

        for step in range(1000):
            batch = torch.from_numpy(np.asarray(memory.sample())).float().cuda()
    """
    assert ids_at(source, "script.cast-after-convert", "info") == [5]
    first = source.replace("np.asarray(memory.sample())).float()",
                           "np.asarray(memory.sample(), dtype=np.float32))")
    assert ids_at(first, "script.cast-after-convert") == []


def test_tokenizer_called_per_text() -> None:
    source = """\
        import keras_hub

        tokenizer = keras_hub.models.GPT2Tokenizer.from_preset("gpt2_base_en")
        out = []
        for text in texts:
            out.append(tokenizer.tokenize(text))
    """
    assert ids_at(source, "script.per-item-call", "info") == [6]
    batched = source.replace("""        out = []
        for text in texts:
            out.append(tokenizer.tokenize(text))""", "        out = tokenizer.tokenize(texts)")
    assert ids_at(batched, "script.per-item-call") == []


def test_jnp_array_of_nested_list() -> None:
    source = """\
        import jax.numpy as jnp

        rows = [[0] * 2000 for _ in range(2000)]
        mask = jnp.array(rows)
    """
    assert ids_at(source, "script.tensor-from-python-list", "info") == [4]
    flat = source.replace("[[0] * 2000 for _ in range(2000)]", "[0.5, 1.0, 2.0]")
    assert ids_at(flat, "script.tensor-from-python-list") == []


def test_adamw_with_foreach_is_not_fused() -> None:
    source = """\
        import torch

        model = Net().cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    """
    assert ids_at(source, "script.optimizer-not-fused", "info") == [4]
    fused = source.replace("foreach=True", "fused=True")
    assert ids_at(fused, "script.optimizer-not-fused") == []

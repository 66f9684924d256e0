"""Round 13's rules for corpus_round12's dev half (script_check/round12_rules.py): each form
fires, and the form its thread recommends (or a near form that is fine) stays silent."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_tf1_ops_built_in_a_function_each_epoch_calls() -> None:
    source = """\
        import tensorflow as tf

        def model_eval(sess, x, y, preds, X, Y):
            correct = tf.equal(tf.argmax(y, axis=-1), tf.argmax(preds, axis=-1))
            return sess.run(correct, feed_dict={x: X, y: Y}).mean()

        sess = tf.Session()
        x = tf.placeholder(tf.float32, shape=(None, 784))
        for epoch in range(10):
            sess.run(train_op)
            print(model_eval(sess, x, y, preds, X_test, Y_test))
    """
    assert ids_at(source, "script.graph-built-per-call") == [4]
    once = """\
        import tensorflow as tf

        sess = tf.Session()
        x = tf.placeholder(tf.float32, shape=(None, 784))
        correct = tf.equal(tf.argmax(y, axis=-1), tf.argmax(preds, axis=-1))
        for epoch in range(10):
            sess.run(train_op)
            print(sess.run(correct, feed_dict={x: X_test, y: Y_test}).mean())
    """
    assert ids_at(once, "script.graph-built-per-call") == []
    eager = source.replace("        sess = tf.Session()\n", "").replace(
        "        x = tf.placeholder(tf.float32, shape=(None, 784))\n", "")
    assert ids_at(eager, "script.graph-built-per-call") == []


def test_hdf5_file_opened_per_item() -> None:
    source = """\
        import h5py

        def load(filename, index):
            f = h5py.File(filename, "r")
            x = f["images"][index]
            f.close()
            return x

        def generator(examples):
            for filename, index in examples:
                yield load(filename, index)
    """
    assert ids_at(source, "script.file-open-per-item") == [4]
    lazy = """\
        import h5py

        class H5Dataset:
            def __getitem__(self, index):
                if self.h5 is None:
                    self.h5 = h5py.File(self.path, "r")
                return self.h5["images"][index]
    """
    assert ids_at(lazy, "script.file-open-per-item") == []
    own_file = source.replace('h5py.File(filename, "r")', 'h5py.File(files[index], "r")')
    assert ids_at(own_file, "script.file-open-per-item") == []


def test_tokenizing_map_without_batched() -> None:
    source = """\
        from functools import partial
        from datasets import load_dataset

        def tokenize_fn(tokenizer, example):
            return tokenizer(example["text"], truncation=True)

        ds = load_dataset("some/corpus", split="train")
        ds = ds.map(partial(tokenize_fn, tokenizer), batched=False)
    """
    assert ids_at(source, "script.unbatched-map") == [8]
    assert ids_at(source.replace("batched=False", "batched=True"), "script.unbatched-map") == []
    # a map that does not tokenize is not this finding
    assert ids_at(source.replace("tokenizer(example", "clean(example"),
                  "script.unbatched-map") == []


def test_tokenizer_called_in_collate_fn() -> None:
    source = """\
        from torch.utils.data import DataLoader

        def collate(examples):
            enc = tokenizer([e["text"] for e in examples], truncation=True, padding=True)
            return enc

        loader = DataLoader(ds, batch_size=32, collate_fn=collate)
    """
    assert ids_at(source, "script.tokenize-in-collator") == [4]
    stacks = source.replace(
        'tokenizer([e["text"] for e in examples], truncation=True, padding=True)',
        'torch.stack([e["input_ids"] for e in examples])')
    assert ids_at(stacks, "script.tokenize-in-collator") == []


def test_np_vectorize_of_a_broadcasting_function() -> None:
    source = """\
        import numpy as np

        def sigmoid(z):
            return 1.0 / (1.0 + np.exp(-z))

        sigmoid_vec = np.vectorize(sigmoid)
    """
    assert ids_at(source, "script.np-vectorize") == [6]
    branching = """\
        import numpy as np

        def clip_label(z):
            if z > 0:
                return 1
            return 0

        clip_vec = np.vectorize(clip_label)
    """
    assert ids_at(branching, "script.np-vectorize") == []


def test_device_tensor_filled_row_by_row_in_forward() -> None:
    source = """\
        import torch
        from torch import nn

        def causal_mask(frames, hw, device):
            n = frames * hw
            mask = torch.full((n, n), float("-inf"), device=device)
            for i in range(n):
                mask[i, : (i // hw + 1) * hw] = 0
            return mask

        class Attn(nn.Module):
            def forward(self, x):
                return self.attn(x, attention_mask=causal_mask(x.shape[1], x.shape[2], x.device))
    """
    assert ids_at(source, "script.per-sample-python-loop") == [7]
    vectorised = source.replace(
        "            for i in range(n):\n"
        "                mask[i, : (i // hw + 1) * hw] = 0\n",
        "            idx = torch.arange(n, device=device) // hw\n"
        "            mask = mask.masked_fill(idx[None, :] <= idx[:, None], 0)\n")
    assert ids_at(vectorised, "script.per-sample-python-loop") == []
    # built once at start-up, not per forward
    once = source.replace("class Attn(nn.Module):", "MASK = causal_mask(4, 16, 'cuda')\n"
                          "        class Attn(nn.Module):").replace(
        "causal_mask(x.shape[1], x.shape[2], x.device)", "MASK")
    assert ids_at(once, "script.per-sample-python-loop") == []


def test_lightning_loader_given_to_fit() -> None:
    source = """\
        import lightning as pl
        import torch

        loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=4)
        trainer = pl.Trainer(accelerator="gpu", max_steps=100000)
        trainer.fit(model, train_dataloaders=loader)
    """
    assert ids_at(source, "script.dataloader-workers-respawn") == [4]
    assert ids_at(source, "script.dataloader-no-pin-memory") == [4]
    kept = source.replace("num_workers=4)", "num_workers=4, persistent_workers=True, "
                                            "pin_memory=True)")
    assert ids_at(kept, "script.dataloader-workers-respawn") == []
    assert ids_at(kept, "script.dataloader-no-pin-memory") == []


def test_loader_without_workers_over_an_unknown_dataset() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        loader = DataLoader(trainset, batch_size=256, shuffle=True)
        for epoch in range(10):
            for x in loader:
                loss = model(x.to(device)).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """
    assert ids_at(source, "script.dataloader-workers", "info") == [5]
    assert ids_at(source.replace("shuffle=True)", "shuffle=True, num_workers=4)"),
                  "script.dataloader-workers") == []
    one_pass = source.replace("        for epoch in range(10):\n", "        if True:\n")
    assert ids_at(one_pass, "script.dataloader-workers") == []
    tensors = source.replace("loader = DataLoader(trainset",
                             "trainset = TensorDataset(X)\n        loader = DataLoader(trainset")
    assert ids_at(tensors, "script.dataloader-workers") == []


def test_one_scaler_for_a_dtype_chosen_between_fp16_and_bf16() -> None:
    source = """\
        import torch

        class Trainer:
            def __init__(self, args):
                if args.fp16 or args.bf16:
                    self.amp_dtype = torch.float16 if args.fp16 else torch.bfloat16
                    self.scaler = torch.cuda.amp.GradScaler()

            def step(self, loss):
                with torch.autocast("cuda", dtype=self.amp_dtype):
                    pass
    """
    assert ids_at(source, "script.gradscaler-bf16") == [7]
    enabled = source.replace("GradScaler()", "GradScaler(enabled=self.amp_dtype == torch.float16)")
    assert ids_at(enabled, "script.gradscaler-bf16") == []
    guarded = source.replace("                    self.scaler = torch.cuda.amp.GradScaler()",
                             "                    if args.fp16:\n"
                             "                        self.scaler = torch.cuda.amp.GradScaler()")
    assert ids_at(guarded, "script.gradscaler-bf16") == []
    # no bf16 branch leads to it: a dtype that may be float16 keeps its scaler (round 6)
    unconditional = source.replace("                if args.fp16 or args.bf16:\n",
                                   "                if True:\n")
    assert ids_at(unconditional, "script.gradscaler-bf16") == []

"""Round 23's rules (issue 24): corpus_round22's dev forms (written in
script_check/round23_rules.py, now in forms_data.py); each form fires and stays silent on
the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"
_WORKERS = "script.dataloader-workers"
_PER_SAMPLE = "script.per-sample-python-loop"

_ARGS = """\
    from transformers import Trainer, TrainingArguments

    def build(model, ds):
        args = TrainingArguments(output_dir="out", bf16=True)
        return Trainer(model=model, args=args, train_dataset=ds)
"""


def test_training_arguments_without_loader_workers() -> None:
    assert 4 in ids_at(_ARGS, _WORKERS)
    fixed = _ARGS.replace("bf16=True", "bf16=True, dataloader_num_workers=4")
    assert 4 not in ids_at(fixed, _WORKERS)


_KWARGS_LOADER = """\
    import torch
    from torch.utils.data import DataLoader

    def loaders(train, **kwargs):
        return DataLoader(train, shuffle=True, **kwargs)

    tl = loaders(train, batch_size=128)
"""


def test_loader_kwargs_no_caller_sets() -> None:
    assert 5 in ids_at(_KWARGS_LOADER, _WORKERS)
    assert 5 in ids_at(_KWARGS_LOADER, "script.dataloader-no-pin-memory")
    fixed = _KWARGS_LOADER.replace("batch_size=128", "batch_size=128, num_workers=4, "
                                   "pin_memory=True")
    assert 5 not in ids_at(fixed, _WORKERS)
    assert 5 not in ids_at(fixed, "script.dataloader-no-pin-memory")


_ROW_DATASET = """\
    import pandas as pd
    import torch
    from torch.utils.data import DataLoader, Dataset

    class DS(Dataset):
        def arrays(self, row):
            for col in self.cols:
                v = row[col]
            return v

        def __getitem__(self, idx):
            row = self.df.iloc[idx, :]
            return self.arrays(row)

    dl = DataLoader(DS(df), batch_size=8)
"""


def test_loader_of_a_dataset_with_python_loops_and_pandas_rows() -> None:
    assert 15 in ids_at(_ROW_DATASET, _WORKERS)
    assert 8 in ids_at(_ROW_DATASET, "script.pandas-in-getitem")
    fixed = _ROW_DATASET.replace("batch_size=8", "batch_size=8, num_workers=4").replace(
        "self.df.iloc[idx, :]", "self.rows[idx]")
    assert 15 not in ids_at(fixed, _WORKERS)
    assert 8 not in ids_at(fixed, "script.pandas-in-getitem")


_RETURNED_LOADERS = """\
    import torch
    from torch.utils.data import DataLoader

    def get_data(cfg, a, b):
        tl = DataLoader(a, num_workers=cfg.workers, pin_memory=True)
        vl = DataLoader(b, num_workers=cfg.workers, pin_memory=True)
        return tl, vl

    def train(cfg, data):
        tl, _ = get_data(cfg, *data)
        for epoch in range(cfg.epochs):
            one_epoch(tl)
"""


def test_returned_loader_used_per_epoch() -> None:
    got = ids_at(_RETURNED_LOADERS, "script.dataloader-workers-respawn")
    assert 5 in got and 6 not in got  # the discarded loader is not iterated
    fixed = _RETURNED_LOADERS.replace("pin_memory=True)", "pin_memory=True, "
                                      "persistent_workers=True)")
    assert ids_at(fixed, "script.dataloader-workers-respawn") == []


_EVAL_GRAD = """\
    import torch
    from torch.autograd import grad

    class M:
        def test_step(self, batch, i):
            torch.set_grad_enabled(True)
            return self.step(batch)

    class P(torch.nn.Module):
        def forward(self, x):
            e = self.model(x)
            return grad(e, [x], create_graph=True)
"""


def test_grad_turned_on_in_eval_steps_and_forward() -> None:
    got = ids_at(_EVAL_GRAD, "script.inference-grad")
    assert 6 in got and 12 in got
    fixed = _EVAL_GRAD.replace("test_step", "training_step").replace(
        "create_graph=True", "create_graph=self.training")
    got = ids_at(fixed, "script.inference-grad")
    assert 6 not in got and 12 not in got


_GATHER = """\
    import torch
    from transformers import Trainer

    class T(Trainer):
        def _compute_loss(self, model, inputs):
            loss = model(**inputs).loss
            g = self.accelerator.gather(loss.detach())
            self.m.append(g.mean().item())
            return loss
"""


def test_gather_in_a_trainer_loss() -> None:
    assert 7 in ids_at(_GATHER, _SYNC)
    assert 7 not in ids_at(_GATHER.replace("_compute_loss", "log_metrics"), _SYNC)


_ITEMS = """\
    import torch

    def remap(ids, table, device):
        t = torch.tensor(ids, device=device)
        return [table[x.item()] for x in t]
"""


def test_item_per_element_of_a_tensor() -> None:
    assert 5 in ids_at(_ITEMS, _SYNC)
    fixed = _ITEMS.replace("for x in t]", "for x in ids]").replace("x.item()", "x")
    assert 5 not in ids_at(fixed, _SYNC)


_INDEX = """\
    import numpy as np
    import torch

    def types(structure, elements):
        return np.array([elements.index(s.symbol) for s in structure])
"""


def test_list_index_search_per_item() -> None:
    assert 5 in ids_at(_INDEX, _PER_SAMPLE)
    fixed = _INDEX.replace("elements.index(s.symbol)", "lookup[s.symbol]")
    assert 5 not in ids_at(fixed, _PER_SAMPLE)


_OPTIM = """\
    import torch

    class Adam(torch.optim.Optimizer):
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    self.state[p]["m"].mul_(0.9).add_(p.grad)
"""


def test_per_parameter_optimizer_loop() -> None:
    assert 6 in ids_at(_OPTIM, "script.foreach-not-used")
    fixed = _OPTIM.replace('self.state[p]["m"].mul_(0.9).add_(p.grad)',
                           "futures.append(reduce(p.grad))")  # communication only
    assert 6 not in ids_at(fixed, "script.foreach-not-used")


_NO_SYNC = """\
    import torch

    for it in range(n):
        logits = model(x)
        loss = f(logits)
        with fabric.no_backward_sync(model, enabled=it % 4 != 0):
            fabric.backward(loss)
"""


def test_no_sync_around_the_backward_only() -> None:
    assert 6 in ids_at(_NO_SYNC, "script.ddp-no-sync")
    fixed = _NO_SYNC.replace("""        logits = model(x)
        loss = f(logits)
        with fabric.no_backward_sync(model, enabled=it % 4 != 0):
""", """        with fabric.no_backward_sync(model, enabled=it % 4 != 0):
            loss = f(model(x))
""")
    assert ids_at(fixed, "script.ddp-no-sync") == []


_HELPER = """\
    import torch

    for batch in loader:
        def ids(size):
            t = torch.tensor([size])
            t = t.to(dev)
            return t
        z = torch.cat([ids(s) for s in batch["sizes"]])
"""


def test_host_tensor_in_a_helper_run_per_batch() -> None:
    assert 5 in ids_at(_HELPER, "script.host-built-in-forward")
    fixed = _HELPER.replace("torch.tensor([size])", "torch.tensor([size], device=dev)")
    assert 5 not in ids_at(fixed, "script.host-built-in-forward")


_PER_DATUM = """\
    import torch
    from torch import autograd

    def matmat(self, X):
        N = X.shape[0]
        for n in range(N):
            out = self.f(X[n].unsqueeze(0))
            g = autograd.grad(out, self.params)
"""


def test_per_datum_grad_loop() -> None:
    assert 6 in ids_at(_PER_DATUM, _PER_SAMPLE)
    fixed = _PER_DATUM.replace("X[n].unsqueeze(0)", "X")
    assert 6 not in ids_at(fixed, _PER_SAMPLE)


_ZIP_CAT = """\
    import torch

    def stress(grads, scale):
        sts = [g * s for g, s in zip(grads, scale)]
        return torch.cat(sts)
"""


def test_zip_comprehension_then_joined() -> None:
    assert 4 in ids_at(_ZIP_CAT, _PER_SAMPLE)
    assert 4 not in ids_at(_ZIP_CAT.replace("torch.cat(sts)", "sts"), _PER_SAMPLE)


_LAX_MAP = """\
    import jax
    from jax import lax

    def sample(model, keys):
        def one(k):
            return model(k)
        return lax.map(one, keys)

    def serve(model, batches, keys):
        for b in batches:
            sample(model, keys)
"""


def test_lax_map_of_a_fresh_closure_per_call() -> None:
    assert 7 in ids_at(_LAX_MAP, "script.jit-in-loop")
    once = _LAX_MAP.replace("""        for b in batches:
            sample(model, keys)""", "        sample(model, keys)")
    assert 7 not in ids_at(once, "script.jit-in-loop")


_VMAP_LOOP = """\
    import jax
    from jax import jit, vmap

    class S:
        def fit(self, p, y):
            @jit
            def step(p):
                return p + y
            for _ in range(50):
                p = step(p)
            return p

    def fold(y):
        return model.fit(p0, y)

    out = vmap(fold)(ys)
"""


def test_jitted_step_loop_under_vmap() -> None:
    assert 10 in ids_at(_VMAP_LOOP, "script.recompile-shapes")
    plain = _VMAP_LOOP.replace("vmap(fold)(ys)", "[fold(y) for y in ys]")
    assert 10 not in ids_at(plain, "script.recompile-shapes")

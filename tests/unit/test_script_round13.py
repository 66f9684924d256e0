"""Round 14's rules (issue 24), written against corpus_round13's dev half
(script_check/round13_rules.py; shape_sync's torch.all truth tests and mask parameters;
sync_flow.host_bound); each form fires and stays silent on the fixed or a near, fine form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_tensor_dataset_through_a_dataloader() -> None:
    source = """\
        import torch
        import torch.utils.data as Data

        ds = Data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
        loader = Data.DataLoader(ds, shuffle=True, batch_size=256)
        for xb, yb in loader:
            loss = model(xb.cuda()).sum()
            loss.backward()
    """
    assert ids_at(source, "script.tensor-dataset-per-row") == [5]
    own = source.replace("Data.TensorDataset(", "MyDataset(")
    assert ids_at(own, "script.tensor-dataset-per-row") == []
    batched = source.replace("shuffle=True, batch_size=256",
                             "sampler=Data.BatchSampler(rs, 256, False), batch_size=None")
    assert ids_at(batched, "script.tensor-dataset-per-row") == []


def test_mul_add_chain_per_parameter_per_step() -> None:
    source = """\
        import torch

        class EMA(torch.nn.Module):
            def avg(self, a, s):
                a.mul_(1 - self.m).add_(s, alpha=self.m)

            def update(self, model):
                for pa, ps in zip(self.module.parameters(), model.parameters()):
                    self.avg(pa, ps)

        ema = EMA(model)
        for batch in loader:
            loss = model(batch).sum()
            loss.backward()
            ema.update(model)
    """
    assert ids_at(source, "script.ema-out-of-place") == [5]
    lerp = source.replace("a.mul_(1 - self.m).add_(s, alpha=self.m)", "a.lerp_(s, self.m)")
    assert ids_at(lerp, "script.ema-out-of-place") == []


def test_all_reduce_of_a_reported_loss_per_microbatch() -> None:
    source = """\
        import torch
        import torch.distributed as dist

        def loss_func(out, mask):
            loss = (out * mask).sum()
            report = loss.detach().clone()
            dist.all_reduce(report)
            return loss, report

        for step, batch in enumerate(loader):
            loss, report = loss_func(model(batch.cuda()), batch.mask.cuda())
            loss.backward()
            optimizer.step()
    """
    assert 7 in ids_at(source, "script.sync-in-step-loop")
    # the gradient all-reduce the algorithm needs (not a detached copy): silent
    grads = source.replace("report = loss.detach().clone()", "report = loss")
    assert 7 not in ids_at(grads, "script.sync-in-step-loop")
    logged = source.replace("            dist.all_reduce(report)\n",
                            "            if step % 100 == 0:\n"
                            "                dist.all_reduce(report)\n")
    assert not {7, 8} & set(ids_at(logged, "script.sync-in-step-loop"))


_FORWARD = """\
    import torch
    from torch import nn

    class M(nn.Module):
        def starts(self, positions):
            idx = (positions == 0).cpu().nonzero()
            return [idx[i].item() for i in range(len(idx))]

        def forward(self, ids, positions):
            return self.lm(ids, self.starts(positions))

    model = M().cuda()
    for batch in requests:
        out = model(batch.ids.cuda(), batch.positions.cuda())
"""


def test_host_copy_of_an_input_in_what_the_forward_runs() -> None:
    lines = ids_at(_FORWARD, "script.sync-in-step-loop")
    assert 6 in lines
    # `.item()` of a value already on the host is no second sync
    assert 7 not in lines
    on_device = _FORWARD.replace("(positions == 0).cpu().nonzero()",
                                 "(positions == 0).int().cumsum(0)")
    assert 6 not in ids_at(on_device, "script.sync-in-step-loop")


def test_tensor_of_a_tuple_of_arrays_and_of_an_h5py_dataset_per_item() -> None:
    source = """\
        import h5py
        import numpy as np
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, path):
                self.file = h5py.File(path, "r")

            def __getitem__(self, i):
                a = np.asarray(load(self.paths[i]))
                b = np.asarray(load(self.paths2[i]))
                pair = torch.Tensor((a, b))
                return pair, torch.tensor(self.file[self.keys[i]])
    """
    assert ids_at(source, "script.tensor-from-python-list") == [13, 14]
    fixed = source.replace("torch.Tensor((a, b))", "torch.from_numpy(np.stack((a, b)))").replace(
        "torch.tensor(self.file[self.keys[i]])", "torch.tensor(np.array(self.file[self.keys[i]]))")
    assert ids_at(fixed, "script.tensor-from-python-list") == []


def test_truth_test_of_torch_all_and_a_mask_parameter_in_a_loss_module() -> None:
    source = """\
        import torch
        from torch import nn

        class Loss(nn.Module):
            def reduce(self, loss, mult_mask):
                n = loss[mult_mask].numel()
                return loss[mult_mask].sum() / n

            def forward(self, pred, target, mult_mask):
                loss = (pred - target) ** 2
                if not torch.all(loss.isfinite()):
                    raise ValueError("non-finite")
                return self.reduce(loss, mult_mask)

        criterion = Loss()
        for batch in loader:
            loss = criterion(model(batch.x.cuda()), batch.y.cuda(), batch.m.cuda())
            loss.backward()
    """
    lines = ids_at(source, "script.sync-in-step-loop")
    assert {6, 11} <= set(lines)
    idx = source.replace("mult_mask", "index")
    assert 6 not in ids_at(idx, "script.sync-in-step-loop")
    host_flag = source.replace("if not torch.all(loss.isfinite()):", "if self.strict:")
    assert 11 not in ids_at(host_flag, "script.sync-in-step-loop")

"""Round 16's step 0 (issue 24): corpus_round14's held-out misses written generally
(script_check/gap16_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_CUDA_DATASET = """\
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Pairs(Dataset):
        def __getitem__(self, i):
            a, b = self.read(i)
            return torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()

    loader = DataLoader(Pairs(files), batch_size=4)
    for a, b in loader:
        mask = torch.zeros(a.shape[0], 1).cuda()
        loss = loss_fn(model(a, mask), b)
        loss.backward()
        optimizer.step()
"""


def test_unpinned_loader_over_a_dataset_that_copies_to_the_gpu() -> None:
    assert ids_at(_CUDA_DATASET, "script.dataloader-no-pin-memory") == [9]
    pinned = _CUDA_DATASET.replace("batch_size=4)", "batch_size=4, pin_memory=True)")
    assert ids_at(pinned, "script.dataloader-no-pin-memory") == []
    on_host = _CUDA_DATASET.replace("torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()",
                                    "torch.from_numpy(a), torch.from_numpy(b)")
    assert ids_at(on_host, "script.dataloader-no-pin-memory") == []


def test_host_made_tensor_copied_in_the_step_loop() -> None:
    assert ids_at(_CUDA_DATASET, "script.host-built-in-forward") == [11]
    on_device = _CUDA_DATASET.replace("torch.zeros(a.shape[0], 1).cuda()",
                                      "torch.zeros(a.shape[0], 1, device=a.device)")
    assert ids_at(on_device, "script.host-built-in-forward") == []
    no_step = _CUDA_DATASET.replace("        loss.backward()\n        optimizer.step()\n", "")
    assert ids_at(no_step, "script.host-built-in-forward") == []


_LITERAL = """\
    import torch

    def scale(inp):
        amax = torch.tensor([0], dtype=torch.float32, device=inp.device)
        return inp * 2, amax

    class Layer(torch.nn.Module):
        def forward(self, x):
            y, _ = scale(x)
            return y
"""


def test_literal_tensor_with_device_in_every_forward() -> None:
    assert ids_at(_LITERAL, "script.host-built-in-forward") == [4]
    on_device = _LITERAL.replace("torch.tensor([0], dtype=torch.float32, device=inp.device)",
                                 "torch.zeros(1, dtype=torch.float32, device=inp.device)")
    assert ids_at(on_device, "script.host-built-in-forward") == []
    not_per_forward = _LITERAL.replace("y, _ = scale(x)", "y = x")
    assert ids_at(not_per_forward, "script.host-built-in-forward") == []

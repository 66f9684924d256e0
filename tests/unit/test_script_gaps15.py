"""Round 15's step 0 (issue 24): corpus_round13's held-out misses written generally
(script_check/gap15_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_DATASET = """\
    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            img, label = self.x[i], self.y[i]
            return torch.tensor(self.x[i], dtype=torch.float), Image.fromarray(img.numpy())

    for xb, yb in DataLoader(Items(x, y), batch_size=32):
        model(xb.cuda()).sum().backward()
"""


def test_tensor_and_pil_image_made_per_item() -> None:
    assert ids_at(_DATASET, "script.tensor-per-item") == [15]
    assert ids_at(_DATASET, "script.pil-convert-per-item") == [15]
    loaded = _DATASET.replace("torch.tensor(self.x[i], dtype=torch.float)",
                              "torch.tensor(np.load(self.x[i]))").replace(
        "Image.fromarray(img.numpy())", "Image.open(self.y[i])")
    assert ids_at(loaded, "script.tensor-per-item") == []
    assert ids_at(loaded, "script.pil-convert-per-item") == []


_LOSSES = """\
    import torch

    class Gan:
        def get_current_losses(self):
            out = {}
            for name in self.loss_names:
                out[name] = float(getattr(self, "loss_" + name))
            return out

    model = create_model(opt)
    for epoch in range(n):
        for i, data in enumerate(loader):
            model.optimize_parameters()
            losses = model.get_current_losses()
"""


def test_loss_read_through_getattr_every_step() -> None:
    assert ids_at(_LOSSES, "script.sync-in-step-loop") == [7]
    logged = _LOSSES.replace("            losses = model.get_current_losses()",
                             "            if i % 100 == 0:\n"
                             "                losses = model.get_current_losses()")
    assert ids_at(logged, "script.sync-in-step-loop") == []
    other = _LOSSES.replace('"loss_" + name', '"lr_" + name')
    assert ids_at(other, "script.sync-in-step-loop") == []


_HELPER_COPY = """\
    import torch

    class Finder:
        def _move(self, inputs, labels):
            inputs = inputs.to(self.device)
            return inputs, labels

        def _batch(self, it):
            inputs, labels = next(it)
            inputs, labels = self._move(inputs, labels)
            loss = self.criterion(self.model(inputs), labels)
            loss.backward()
            self.optimizer.step()

        def run(self, loader, n):
            it = iter(loader)
            for i in range(n):
                self._batch(it)
"""


def test_blocking_copy_two_calls_below_the_loop() -> None:
    assert ids_at(_HELPER_COPY, "script.blocking-h2d-copy") == [5]
    overlapped = _HELPER_COPY.replace("to(self.device)", "to(self.device, non_blocking=True)")
    assert ids_at(overlapped, "script.blocking-h2d-copy") == []
    not_the_batch = _HELPER_COPY.replace("inputs = inputs.to", "w = self.w.to")
    assert ids_at(not_the_batch, "script.blocking-h2d-copy") == []


def test_loader_without_pinning_for_a_copy_in_a_trainer_class() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        train_loader = DataLoader(ds, batch_size=4, num_workers=4)

        class Trainer:
            def epoch(self):
                for x, y in self.train_loader:
                    x, y = x.to(self.device), y.to(self.device)
                    self.loss(self.model(x), y).backward()
                    self.optimizer.step()
    """
    assert ids_at(source, "script.dataloader-no-pin-memory") == [4]
    assert ids_at(source, "script.blocking-h2d-copy") == [9]
    pinned = source.replace("num_workers=4", "num_workers=4, pin_memory=True").replace(
        "to(self.device)", "to(self.device, non_blocking=True)")
    assert ids_at(pinned, "script.dataloader-no-pin-memory") == []
    assert ids_at(pinned, "script.blocking-h2d-copy") == []

"""Round 16's rules (issue 24): corpus_round15's dev forms (script_check/round16_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_LIGHTNING = """\
    import lightning as L

    class Module(L.LightningModule):
        def training_step(self, batch, batch_idx):
            loss = self.model(batch).loss
            self.log("train_loss", loss, sync_dist=True)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self.model(batch).loss, sync_dist=True)
"""


def test_sync_dist_in_training_step_only() -> None:
    assert ids_at(_LIGHTNING, "script.sync-in-step-loop") == [6]
    local = _LIGHTNING.replace('loss, sync_dist=True)', 'loss, sync_dist=False)')
    assert ids_at(local, "script.sync-in-step-loop") == []


_METRICS = """\
    import torch
    import torch.distributed as dist

    def train_step(model, batch, opt):
        stats = model.losses(batch)
        stats["loss"].backward()
        opt.step()
        for name, value in stats.items():
            dist.all_reduce(value)
        return stats

    for batch in loader:
        train_step(model, batch, opt)
"""


def test_collective_per_metric_per_step() -> None:
    assert ids_at(_METRICS, "script.sync-in-step-loop") == [9]
    packed = _METRICS.replace("        for name, value in stats.items():\n"
                              "            dist.all_reduce(value)\n",
                              "        dist.all_reduce(torch.stack(list(stats.values())))\n")
    assert ids_at(packed, "script.sync-in-step-loop") == []


_MASK = """\
    import torch

    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        out = model(x)
        pad = y == 0
        out[pad] = 0.0
        loss = out.sum()
        loss.backward()
        optimizer.step()
"""


def test_boolean_mask_assignment_in_the_step() -> None:
    assert ids_at(_MASK, "script.sync-in-step-loop") == [7]
    filled = _MASK.replace("out[pad] = 0.0", "out = out.masked_fill(pad, 0.0)")
    assert ids_at(filled, "script.sync-in-step-loop") == []
    indexed = _MASK.replace("out[pad] = 0.0", "out[0] = 0.0")
    assert ids_at(indexed, "script.sync-in-step-loop") == []


_ELEMENTS = """\
    import torch

    class Vision(torch.nn.Module):
        def positions(self, grid):
            out = []
            for t, h, w in grid:
                out.append(torch.arange(h.item()))
            return out

        def forward(self, x, grid):
            return self.blocks(x, self.positions(grid))

    for x, grid in batches:
        model(x.cuda(), grid.cuda())
"""


def test_item_per_element_of_a_forward_input() -> None:
    assert ids_at(_ELEMENTS, "script.sync-in-step-loop") == [7]
    held = _ELEMENTS.replace("for t, h, w in grid:", "for t, h, w in self.sizes:") \
        .replace("h.item()", "h")
    assert ids_at(held, "script.sync-in-step-loop") == []

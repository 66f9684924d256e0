"""Round 17's rules (issue 24): corpus_round16's dev forms (script_check/round17_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_FILTER = """\
    import torch

    total = torch.zeros((), device="cuda")
    for x, y in loader:
        loss = loss_fn(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        if torch.isnan(loss) or torch.isinf(loss):
            continue
        total = total + loss.detach()
"""


def test_tensor_predicate_in_a_python_if_per_step() -> None:
    assert 8 in ids_at(_FILTER, "script.sync-in-step-loop")
    on_device = _FILTER.replace("        if torch.isnan(loss) or torch.isinf(loss):\n"
                                "            continue\n"
                                "        total = total + loss.detach()\n",
                                "        total = total + torch.where(torch.isfinite(loss), "
                                "loss.detach(), 0.0)\n")
    assert ids_at(on_device, "script.sync-in-step-loop") == []
    no_step = _FILTER.replace("        optimizer.step()\n", "").replace(
        "        loss.backward()\n", "")
    assert 8 not in ids_at(no_step, "script.sync-in-step-loop")


_TABLE = """\
    import torch

    class Scheduler:
        def step(self, out, sample):
            sigma = self.sigmas[self.index].to(sample.device)
            self.index += 1
            return sample - sigma * out

    scheduler = Scheduler()
    for t in timesteps:
        latents = scheduler.step(unet(latents, t), latents)
"""


def test_table_element_copied_in_a_method_called_per_iteration() -> None:
    assert ids_at(_TABLE, "script.blocking-h2d-copy") == [5]
    overlapped = _TABLE.replace(".to(sample.device)", ".to(sample.device, non_blocking=True)")
    assert ids_at(overlapped, "script.blocking-h2d-copy") == []
    once = _TABLE.replace("    for t in timesteps:\n"
                          "        latents = scheduler.step(unet(latents, t), latents)\n",
                          "    latents = scheduler.step(unet(latents, 0), latents)\n")
    assert ids_at(once, "script.blocking-h2d-copy") == []

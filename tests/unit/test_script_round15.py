"""Round 15's rules (issue 24), written against corpus_round14's dev half
(script_check/round15_rules.py; gap15_rules' batch copies through a dict's parts); each form
fires and stays silent on the fixed or a near, fine form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_ACCUMULATE = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Brain:
        def fit_batch(self, batch, step):
            should_step = step % self.k == 0
            loss = self.compute(batch)
            (loss / self.k).backward()
            if should_step:
                self.optimizer.step()
                self.optimizer.zero_grad()

    brain = Brain()
    brain.modules = DDP(model.cuda())
    for step, batch in enumerate(loader, 1):
        brain.fit_batch(batch, step)
"""


def test_ddp_accumulation_in_a_per_batch_method() -> None:
    assert ids_at(_ACCUMULATE, "script.ddp-no-sync") == [8]
    every_step = _ACCUMULATE.replace("            if should_step:\n", "            if True:\n")
    assert ids_at(every_step, "script.ddp-no-sync") == []
    single = _ACCUMULATE.replace("DDP(model.cuda())", "model.cuda()")
    assert ids_at(single, "script.ddp-no-sync") == []


_LOGGED = """\
    import logging
    import torch

    logger = logging.getLogger(__name__)

    class Schedule:
        def _compute_loss(self, out, y, i):
            loss = self._loss_fn(out, y)
            logger.debug(f"microbatch {i}: {loss}")
            return loss

        def step(self, xs, ys):
            for i, (x, y) in enumerate(zip(xs, ys)):
                loss = self._compute_loss(self.stage(x), y, i)
                loss.backward()

    schedule = Schedule()
    for step in range(n):
        schedule.step(xs, ys)
        optimizer.step()
"""


def test_loss_tensor_formatted_into_a_log_message() -> None:
    assert ids_at(_LOGGED, "script.sync-in-step-loop") == [9]
    index_only = _LOGGED.replace("{i}: {loss}", "{i}")
    assert ids_at(index_only, "script.sync-in-step-loop") == []


def test_blocking_copies_of_a_batch_dicts_parts() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        class Trainer:
            def preprocess(self, batch):
                batch["img"] = batch["img"].to(self.device)
                return batch

            def epoch(self):
                for batch in DataLoader(self.ds, batch_size=64, pin_memory=True):
                    batch = self.preprocess(batch)
                    self.model(batch["img"]).sum().backward()
                    self.optimizer.step()
    """
    assert ids_at(source, "script.blocking-h2d-copy") == [6]
    fixed = source.replace("to(self.device)", "to(self.device, non_blocking=True)")
    assert ids_at(fixed, "script.blocking-h2d-copy") == []

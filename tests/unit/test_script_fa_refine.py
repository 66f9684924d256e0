"""Two false alarms of older rules, seen on round22_heldout after it was scored (a
recorded half's figure only gains from them: floors are found >= and alarms <=), made
general: a backward pass made by a helper is a backward pass, and an epoch timer read
without a sync is off by a few queued steps, not wrong."""

from __future__ import annotations

from devicebench.script_check import check_source

ACCUM = '''\
import torch
from trainlib import backward


def helper_backward(loss, scaler):
    scaler.scale(loss).backward()


def train(model, loader, optimizer, scaler, accum, via):
    model.train()
    for batch in loader:
        optimizer.zero_grad()
        for piece in batch.chunk(accum):
            out = model(piece)
            via(out.mean(), scaler)
        optimizer.step()


model = torch.nn.Linear(4, 4).cuda()
'''


def _grad(source: str) -> list[str]:
    return [f.severity for f in check_source(source) if f.id == "script.inference-grad"]


def test_a_backward_made_by_a_helper_or_an_imported_backward_is_training():
    assert _grad(ACCUM.replace("via(out", "backward(out")) == []
    assert _grad(ACCUM.replace("via(out", "helper_backward(out")) == []
    # a helper that makes no backward pass leaves the loop a forward-only one
    assert _grad(ACCUM.replace("via(out", "print(out")) == ["warning"]


TIMER = '''\
import time
import torch
from lightning.pytorch.callbacks import Callback


class Timer(Callback):
    def on_train_{what}_start(self, trainer, pl_module, *args):
        self._t0 = time.time()

    def on_train_{what}_end(self, trainer, pl_module, *args):
        pl_module.log("t", time.time() - self._t0)


model = torch.nn.Linear(4, 4).cuda()
'''


def _timing(what: str) -> list[str]:
    return [f.severity for f in check_source(TIMER.format(what=what))
            if f.id == "script.unsynced-timing"]


def test_an_epoch_timer_is_info_and_a_batch_timer_stays_a_warning():
    assert _timing("epoch") == ["info"]
    assert _timing("batch") == ["warning"]

"""A sync in an evaluation pass the epoch loop runs (pytorch/examples mnist/main.py's
`test()`: `with torch.no_grad()`, `.item()` per test batch) is one sync per evaluation
batch, not per training step: info, saying so. The same read in a callee that runs with
gradients on stays a warning."""

from __future__ import annotations

from devicebench.script_check import check_source

MNIST = '''\
import torch
import torch.nn.functional as F


def train(model, device, train_loader, optimizer):
    model.train()
    for data, target in train_loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    {guard}
        for data, target in test_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target.to(device), reduction="sum").item()
    return test_loss


for epoch in range(1, 15):
    train(model, device, train_loader, optimizer)
    test(model, device, test_loader)
'''


def _sync(guard: str):
    return [f for f in check_source(MNIST.format(guard=guard))
            if f.id == "script.sync-in-step-loop" and f.location.endswith(":21")]


def test_an_evaluation_pass_without_gradients_is_info_per_evaluation_batch():
    f, = _sync("with torch.no_grad():")
    assert f.severity == "info"
    assert "`test` is an evaluation pass (no gradients) that the loop at line 25 runs" in (
        f.observed) and "once per batch of its loop at line 19" in f.observed
    f, = _sync("with torch.inference_mode():")
    assert f.severity == "info"


def test_the_same_read_with_gradients_on_stays_a_warning():
    f, = _sync("if True:")
    assert f.severity == "warning" and "so this runs on every step" in f.observed

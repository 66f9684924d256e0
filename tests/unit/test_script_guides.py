"""The frameworks' own performance guides as rules (issue 24, round 10; the item list is
tests/fixtures/scripts/guides.md): each rule fires on the guide's pattern and stays silent on
the form the guide recommends."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_ddp_find_unused_parameters_true_only() -> None:
    source = """\
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from transformers import TrainingArguments

        a = DDP(model, device_ids=[0], find_unused_parameters=True)
        b = DDP(model, device_ids=[0], find_unused_parameters=False)
        c = DDP(model, device_ids=[0])
        args = TrainingArguments(output_dir="o", ddp_find_unused_parameters=True)
        ok = TrainingArguments(output_dir="o", ddp_find_unused_parameters=False)
    """
    assert ids_at(source, "script.ddp-find-unused-parameters", "info") == [5, 8]


def test_data_parallel_but_not_ddp() -> None:
    source = """\
        import torch
        import torch.nn as nn

        model = nn.DataParallel(net).cuda()
        other = nn.parallel.DistributedDataParallel(net, device_ids=[0])
    """
    assert ids_at(source, "script.data-parallel", "info") == [4]


def test_conv_bias_before_batch_norm() -> None:
    source = """\
        import torch.nn as nn

        stem = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU())
        good = nn.Sequential(nn.Conv2d(3, 64, 3, bias=False), nn.BatchNorm2d(64))
        head = nn.Sequential(nn.Conv2d(64, 10, 1), nn.ReLU())

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(64, 64, 3, padding=1)
                self.bn = nn.BatchNorm2d(64)
                self.conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
                self.bn2 = nn.BatchNorm2d(64)

            def forward(self, x):
                return self.bn2(self.conv2(self.bn(self.conv(x))))
    """
    assert ids_at(source, "script.conv-bias-before-bn", "info") == [3, 10]


def test_backward_inside_autocast_block() -> None:
    source = """\
        import torch

        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).sum()
                loss.backward()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss2 = model(x).sum()
            scaler.scale(loss2).backward()
    """
    assert ids_at(source, "script.backward-in-autocast", "info") == [6]


def test_channels_last_for_conv_models_under_amp() -> None:
    source = """\
        import torch
        import torchvision

        model = torchvision.models.resnet50().to("cuda")
        for imgs, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(imgs.cuda()).sum()
    """
    assert ids_at(source, "script.no-channels-last", "info") == [4]
    converted = source.replace('.to("cuda")', '.to("cuda", memory_format=torch.channels_last)')
    assert ids_at(converted, "script.no-channels-last") == []
    fp32 = source.replace("with torch.autocast(\"cuda\", dtype=torch.float16):", "if True:")
    assert ids_at(fp32, "script.no-channels-last") == []


def test_fsdp_policy_with_fp32_params() -> None:
    source = """\
        import torch
        from torch.distributed.fsdp import MixedPrecision

        slow = MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.float32)
        fast = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    """
    assert ids_at(source, "script.mixed-precision-fp32-params", "info") == [4]


def test_loss_and_grad_by_two_calls() -> None:
    source = """\
        import jax

        loss_jit = jax.jit(loss_fn)
        grad_jit = jax.jit(jax.grad(loss_fn))

        for batch in batches:
            loss = loss_jit(params, batch)
            grads = grad_jit(params, batch)
            params = update(params, grads)

        def step(params, batch, other):
            loss = loss_fn(params, other)
            grads = jax.grad(loss_fn)(params, batch)
            return loss, grads
    """
    assert ids_at(source, "script.separate-loss-and-grad", "info") == [7]


def test_interleave_without_parallel_calls() -> None:
    source = """\
        import tensorflow as tf

        files = tf.data.Dataset.list_files("gs://bucket/*.tfrecord")
        ds = files.interleave(tf.data.TFRecordDataset, cycle_length=8)
        ds2 = files.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
    """
    assert ids_at(source, "script.tfdata-serial-interleave", "info") == [4]

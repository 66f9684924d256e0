"""Round 20's step 0 (issue 24): corpus_round18's held-out misses written generally
(script_check/gap20_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_MAP = """\
    import tensorflow as tf

    def preprocess(x, y):
        x = tf.cast(x, dtype=tf.float32) / 255.0
        return x, tf.one_hot(y, depth=10)

    train = tf.data.Dataset.from_tensor_slices((xs, ys))
    train = train.shuffle(1000).map(preprocess).batch(128)
    for xb, yb in train:
        step(xb, yb)
"""


def test_elementwise_map_before_batch() -> None:
    assert ids_at(_MAP, "script.unbatched-map") == [8]
    batched = _MAP.replace(".map(preprocess).batch(128)", ".batch(128).map(preprocess)")
    assert ids_at(batched, "script.unbatched-map") == []
    python = _MAP.replace("tf.one_hot(y, depth=10)", "augment(y)")
    assert ids_at(python, "script.unbatched-map") == []
    branchy = _MAP.replace("        x = tf.cast", "        if y:\n            y = 0\n"
                           "        x = tf.cast")
    assert ids_at(branchy, "script.unbatched-map") == []


_IMAGE = """\
    import tensorflow as tf

    def load(path):
        return tf.io.decode_jpeg(tf.io.read_file(path))

    ds = tf.data.Dataset.list_files(pattern).map(load).batch(32)
"""


def test_image_decoding_is_not_taken_as_vectorizable() -> None:
    assert ids_at(_IMAGE, "script.unbatched-map") == []


_CSV = """\
    import tensorflow as tf

    def parse_csv(value):
        columns = tf.io.decode_csv(value, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, columns))
        return features, tf.equal(features.pop("label"), ">50K")

    def input_fn(path, batch_size):
        ds = tf.data.TextLineDataset(path)
        ds = ds.map(parse_csv, num_parallel_calls=5)
        later = ds.repeat(2)
        later = later.batch(batch_size)
        return later
"""


def test_csv_parse_before_a_batch_on_a_later_name() -> None:
    assert ids_at(_CSV, "script.unbatched-map") == [10]
    unbatched = _CSV.replace("later = later.batch(batch_size)", "later = later.prefetch(2)")
    assert ids_at(unbatched, "script.unbatched-map") == []


_COPY = """\
    import torch

    def batch_to(systems, dtype=None, device=None):
        return [s.to(dtype=dtype, device=device) for s in systems]

    for systems in loader:
        systems = batch_to(systems, torch.float32, torch.device("cuda"))
        model(systems).backward()
"""


def test_keyword_copies_of_batch_elements() -> None:
    assert ids_at(_COPY, "script.blocking-h2d-copy") == [4]
    fixed = _COPY.replace("device=device)", "device=device, non_blocking=True)")
    assert ids_at(fixed, "script.blocking-h2d-copy") == []
    once = _COPY.replace("for systems in loader:", "if loader:")
    assert ids_at(once, "script.blocking-h2d-copy") == []


_GATHER = """\
    import torch
    import torch.distributed as dist

    class Actor:
        def train_step(self, batch):
            self.model(batch).backward()
            out = [None] * dist.get_world_size()
            dist.gather_object({"loss": 1.0}, out, dst=0)
            return out

    actor = Actor()
    for batch in stream:
        actor.train_step(batch)
"""


def test_object_collective_every_step() -> None:
    assert ids_at(_GATHER, "script.sync-in-step-loop") == [8]
    once = _GATHER.replace("    for batch in stream:\n        actor.train_step(batch)",
                           "    actor.train_step(first)")
    assert ids_at(once, "script.sync-in-step-loop") == []


_PLAN = """\
    import torch

    class Wrapper:
        def plan(self, qo_indptr, kv_len):
            host = qo_indptr.to("cpu")
            lens = kv_len.tolist()
            ids = torch.tensor(lens, dtype=torch.long, device="cuda")
            return host, ids

    class Backend:
        def init_metadata(self, batch):
            self.wrapper.plan(batch.qo_indptr, batch.seq_lens)

    for batch in scheduler:
        backend.init_metadata(batch)
"""


def test_host_reads_of_received_tensors_in_a_per_batch_helper() -> None:
    assert ids_at(_PLAN, "script.sync-in-step-loop") == [5, 6]
    assert ids_at(_PLAN, "script.tensor-from-python-list") == [7]
    once = _PLAN.replace("    for batch in scheduler:\n        backend.init_metadata(batch)",
                         "    backend.init_metadata(first)")
    assert ids_at(once, "script.sync-in-step-loop") == []
    assert ids_at(once, "script.tensor-from-python-list") == []
    own = _PLAN.replace('host = qo_indptr.to("cpu")', 'host = torch.ones(3).to("cpu")')
    assert ids_at(own, "script.sync-in-step-loop") == [6]


_EXPERTS = """\
    import torch
    from torch import nn

    def expand(bias, counts, padded):
        out = bias.repeat_interleave(counts, dim=0)
        offsets = torch.cumsum(counts, dim=0)
        return out, padded - int(offsets[-1])

    class Experts(nn.Module):
        def forward(self, x, counts):
            return expand(self.b, counts, x.shape[0])
"""


def test_forward_code_without_a_loop_in_the_file() -> None:
    assert ids_at(_EXPERTS, "script.sync-in-step-loop") == [5, 7]
    fixed = _EXPERTS.replace("dim=0)\n        offsets", "dim=0, output_size=padded)\n"
                             "        offsets").replace("int(offsets[-1])", "0")
    assert ids_at(fixed, "script.sync-in-step-loop") == []
    plain = _EXPERTS.replace("class Experts(nn.Module):", "class Experts:")
    assert ids_at(plain, "script.sync-in-step-loop") == []


_DISPATCH = """\
    import torch

    class Dispatcher:
        def dispatch(self, ids, received):
            return torch.repeat_interleave(ids, received)

    d = Dispatcher()
    for tokens in loader:
        model(tokens, dispatcher=d).backward()
"""


def test_methods_of_an_instance_a_loop_passes_on() -> None:
    assert ids_at(_DISPATCH, "script.sync-in-step-loop") == [5]
    unused = _DISPATCH.replace("model(tokens, dispatcher=d)", "model(tokens)")
    assert ids_at(unused, "script.sync-in-step-loop") == []


_SLICES = """\
    import torch

    def split(features, lens):
        chunks, start = [], 0
        for n in lens:
            chunks.append(features[start:start + n])
            start = start + n
        return chunks

    for req in requests:
        feats, lens = encoder(req.cuda())
        thinker(split(feats, lens))
"""


def test_slices_bounded_by_a_received_tensor_s_elements() -> None:
    assert ids_at(_SLICES, "script.sync-in-step-loop") == [6]
    constant = _SLICES.replace("for n in lens:", "for n in (4, 4):")
    assert ids_at(constant, "script.sync-in-step-loop") == []


def test_forward_code_of_a_module_the_file_runs_itself_is_left_to_hot() -> None:
    built = _EXPERTS + "\n    net = Experts()\n    out = net(x, counts)\n"
    assert ids_at(built, "script.sync-in-step-loop") == []
    int_repeats = _DISPATCH.replace("torch.repeat_interleave(ids, received)",
                                    "torch.repeat_interleave(ids, 2)")
    assert ids_at(int_repeats, "script.sync-in-step-loop") == []

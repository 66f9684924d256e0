"""Round 13's step 0 (issue 24): corpus_round11's held-out misses written generally
(script_check/gap13_rules.py, sync_rules._consumed_in_return, kinds._param_list); each
form fires and stays silent on the form its thread recommends (or a near form that is fine).
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_host_value_passed_on_inside_a_return_is_a_sync_per_call() -> None:
    source = """\
        import torch
        from torch_scatter import scatter

        def aggregate(messages, receiver, num_nodes):
            return scatter(messages, receiver, dim=0, dim_size=receiver.max().item() + 1)

        for data in loader:
            data = data.to(device)
            messages, receiver = model(data)
            loss = aggregate(messages, receiver, data.num_nodes).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    assert ids_at(source, "script.sync-in-step-loop") == [5]
    fixed = source.replace("receiver.max().item() + 1", "num_nodes")
    assert ids_at(fixed, "script.sync-in-step-loop") == []
    # converting as it returns is the caller's business (unchanged)
    handed = source.replace("return scatter(messages, receiver, dim=0, dim_size="
                            "receiver.max().item() + 1)", "return receiver.max().item()")
    assert ids_at(handed, "script.sync-in-step-loop") == []


def test_tensor_from_rows_unpacked_by_zip_star_through_a_parameter() -> None:
    source = """\
        import random
        import torch

        class Trainer:
            def train_step(self, state, action):
                state = torch.tensor(state, dtype=torch.float)
                loss = self.model(state).sum()
                loss.backward()
                self.optimizer.step()

        def train_long(trainer, memory):
            states, actions = zip(*random.sample(memory, 64))
            trainer.train_step(states, actions)

        for game in range(n_games):
            train_long(trainer, memory)
    """
    assert ids_at(source, "script.tensor-from-python-list") == [6]
    stacked = source.replace("trainer.train_step(states, actions)",
                             "trainer.train_step(np.array(states), actions)")
    assert ids_at(stacked, "script.tensor-from-python-list") == []


def test_loop_over_rows_of_a_device_tensor_in_a_loss_helper() -> None:
    source = """\
        import torch

        def get_centroids(embeddings):
            centroids = []
            for speaker in embeddings:
                centroids.append(speaker.mean(dim=0))
            return torch.stack(centroids)

        device = torch.device("cuda")
        embedder = Embedder().to(device)
        for batch in loader:
            embeddings = embedder(batch.to(device)).reshape(n, m, -1)
            loss = ge2e(get_centroids(embeddings))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    assert ids_at(source, "script.per-sample-python-loop") == [5]
    vectorised = source.replace(
        "    centroids = []\n            for speaker in embeddings:\n"
        "                centroids.append(speaker.mean(dim=0))\n"
        "            return torch.stack(centroids)", "    return embeddings.mean(dim=1)")
    assert "for speaker" not in vectorised
    assert ids_at(vectorised, "script.per-sample-python-loop") == []
    # a loop over a Python list the caller passes is not a loop over tensor rows
    listed = source.replace("get_centroids(embeddings)", "get_centroids(names)")
    assert ids_at(listed, "script.per-sample-python-loop") == []


def test_no_grad_in_an_inference_only_script() -> None:
    source = """\
        import torch

        def generate(models, sample, generator):
            with torch.no_grad():
                return generator.generate(models, sample)

        for sample in itr:
            task.write(generate(models, sample, generator))
    """
    assert ids_at(source, "script.no-grad-not-inference-mode") == [4]
    assert ids_at(source.replace("no_grad", "inference_mode"),
                  "script.no-grad-not-inference-mode") == []
    # a script that trains keeps no_grad (inference tensors cannot enter autograd later)
    trains = source + "        loss.backward()\n"
    assert ids_at(trains, "script.no-grad-not-inference-mode") == []


def test_steps_per_epoch_given_a_sample_count() -> None:
    source = """\
        from keras.preprocessing.image import ImageDataGenerator

        batch_size = 32
        nb_train_samples = 91234
        gen = ImageDataGenerator().flow_from_directory(d, batch_size=batch_size)
        model.fit_generator(gen, steps_per_epoch=nb_train_samples, epochs=10)
    """
    assert ids_at(source, "script.steps-per-epoch-samples") == [6]
    fixed = source.replace("steps_per_epoch=nb_train_samples",
                           "steps_per_epoch=nb_train_samples // batch_size")
    assert ids_at(fixed, "script.steps-per-epoch-samples") == []
    assert ids_at(source.replace("steps_per_epoch=nb_train_samples", "steps_per_epoch=len(gen)"),
                  "script.steps-per-epoch-samples") == []


def test_cache_dataset_copying_before_random_transforms() -> None:
    source = """\
        from monai.data import CacheDataset
        from monai.transforms import Compose, LoadImaged, RandCropByPosNegLabeld

        tf = Compose([LoadImaged(keys=["image"]), RandCropByPosNegLabeld(keys=["image"])])
        ds = CacheDataset(data=files, transform=tf, cache_rate=1.0)
    """
    assert ids_at(source, "script.cache-dataset-copy") == [5]
    assert ids_at(source.replace("cache_rate=1.0", "cache_rate=1.0, copy_cache=False"),
                  "script.cache-dataset-copy") == []
    deterministic = source.replace(", RandCropByPosNegLabeld(keys=[\"image\"])", "")
    assert ids_at(deterministic, "script.cache-dataset-copy") == []


def test_cast_to_float_before_the_device_copy() -> None:
    source = """\
        import torch

        device = torch.device("cuda")
        for t in range(steps):
            s = torch.stack(frames).to(dtype=torch.float32, device=device).div_(255)
            q = torch.stack(frames).float().to(device)
            learn(s, q)
    """
    assert ids_at(source, "script.cast-before-copy") == [5, 6]
    fixed = source.replace(".to(dtype=torch.float32, device=device)",
                           ".to(device=device).to(dtype=torch.float32)").replace(
        ".float().to(device)", ".to(device).float()")
    assert ids_at(fixed, "script.cast-before-copy") == []
    # narrowing before the copy moves fewer bytes: fine
    assert ids_at(source.replace("float32", "float16").replace(".float()", ".half()"),
                  "script.cast-before-copy") == []

"""Doctor's behaviour on single corpus cases and on this machine's own probe (issue 24): the
frameworks' words kept and parsed, wheel libraries not on the path, fixes in the platform's
shell syntax, process state read inside the user's process, a named cause before a generic
reinstall, the last release a platform has. (Moved here from test_env_corpus.py, which holds
the corpus figures.)"""

from __future__ import annotations

import json
from pathlib import Path

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _cases(name: str) -> list[dict]:
    path = FIXTURES / "env_corpus" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))["cases"]


CORPUS, NEW, ROUND2 = _cases("cases"), _cases("new_cases"), _cases("round2_cases")


def test_framework_messages_are_bounded_and_parsed() -> None:
    from devicebench.env.interpret import framework_probe_from_worker

    noise = "".join(f"W0000 tf] warning number {i}\n" for i in range(500))
    said = ("E cuda_dnn.cc:447] Loaded runtime CuDNN library: 8.7.0 but source was compiled "
            "with: 8.9.4.  CuDNN library needs ...\n")
    probe = framework_probe_from_worker("tensorflow", "ok", {"name": "tensorflow"}, said + noise)
    assert probe.reported == {"cudnn_loaded": "8.7.0", "cudnn_built": "8.9.4"}
    assert len(probe.messages) == 40 and all(len(m) <= 400 for m in probe.messages)
    assert probe.messages[0].startswith("E cuda_dnn.cc")


def test_installed_wheel_libs_are_not_answered_with_install_them() -> None:
    # Issue 24, class 5: the libraries are installed (by nvidia-* wheels), only not found.
    case = next(c for c in CORPUS if c["url"].endswith("/tensorflow/issues/63362"))
    findings = {f.id: f for f in run_checks(snapshot_from_raw(case["raw"]))}
    assert findings["cuda.wheel-libs-not-on-path"].severity == "error"
    not_seen = findings["gpu.not-seen"]
    assert "not on the loader's path" in not_seen.why
    assert not_seen.fix.startswith("export LD_LIBRARY_PATH=") and "pip install" not in not_seen.fix


def test_recorded_raw_inputs_replay_to_the_live_probe() -> None:
    """The raw document the probe records interprets to what the live probe builds."""
    from devicebench.env.probe import probe_host_layer, read_raw_environment

    replayed = snapshot_from_raw(read_raw_environment([]))
    live = probe_host_layer()
    assert replayed.host == live.host
    assert replayed.distributions == live.distributions
    assert replayed.system_cuda_libs == live.system_cuda_libs
    assert replayed.wheel_cuda_libs == live.wheel_cuda_libs
    assert replayed.blas == live.blas and replayed.env_vars == live.env_vars


def test_a_real_healthy_probe_output_keeps_the_frameworks_words() -> None:
    # Recorded here with read_raw_environment: TF's real CPU-only log lines are kept, and
    # none of them becomes an error or warning.
    doc = json.loads((FIXTURES / "raw" / "linux_cpu_vm_tf_jax_torch.json").read_text())
    snap = snapshot_from_raw(doc)
    tf = snap.frameworks["tensorflow"]
    assert any("cuInit" in m for m in tf.messages) and tf.reported == {}
    assert [f.id for f in run_checks(snap) if f.severity != "info"] == []


def test_fixes_on_windows_use_windows_shell_syntax() -> None:
    import re

    windows = [c for c in CORPUS if c["raw"]["host"]["system"] == "Windows"]
    assert len(windows) >= 5
    for case in windows:
        for f in run_checks(snapshot_from_raw(case["raw"])):
            if "WSL2" in f.fix:
                continue
            assert not re.search(r"\bexport \w+=|\bunset \w+|\b[A-Z_]+=\S+ python", f.fix), f


def test_jax_on_windows_is_not_told_to_install_cuda_wheels_it_cannot_have() -> None:
    case = next(c for c in CORPUS if c["url"].endswith("RoboEden/jux/issues/11"))
    not_seen = next(f for f in run_checks(snapshot_from_raw(case["raw"]))
                    if f.id == "gpu.not-seen")
    assert "WSL2" in not_seen.fix


def test_a_mask_set_after_cuda_init_is_an_error_only_in_process_state() -> None:
    # The corpus case as doctor sees it from outside: nothing to see (stays a miss) ...
    case = next(c for c in CORPUS if "optimum-benchmark/issues/27" in c["url"])
    outside = run_checks(snapshot_from_raw(case["raw"]))
    assert "device.mask-set-too-late" not in {f.id for f in outside}
    # ... and as read inside the script's process, after torch had initialised CUDA.
    raw = dict(case["raw"], process={"env": {"CUDA_VISIBLE_DEVICES": "4,5"},
                                     "imported": ["torch"],
                                     "torch": {"cuda_initialized": True, "device_count": 8}})
    f = next(f for f in run_checks(snapshot_from_raw(raw)) if f.id == "device.mask-set-too-late")
    assert f.severity == "error" and "CUDA_VISIBLE_DEVICES=4,5 python" in f.fix
    ok = dict(raw, process=dict(raw["process"], torch={"cuda_initialized": True,
                                                       "device_count": 2}))
    assert "device.mask-set-too-late" not in {f.id for f in run_checks(snapshot_from_raw(ok))}


def test_process_state_reads_without_importing_a_framework() -> None:
    import subprocess
    import sys

    code = ("import sys; from devicebench.env.probe import read_process_state; "
            "s = read_process_state(); "
            "print(s['imported'], [m for m in ('torch', 'tensorflow', 'jax') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_a_generic_reinstall_fix_gives_way_to_a_named_cause() -> None:
    # jax#24901: jaxlib older than jax; reinstalling jax alone reproduces the failure.
    case = next(c for c in NEW + ROUND2 + CORPUS if c["url"].endswith("jax/issues/24901"))
    findings = run_checks(snapshot_from_raw(case["raw"]))
    failed = next(f for f in findings if f.id == "framework.import-failed")
    assert "--force-reinstall" not in failed.fix and "stack.release-skew" in failed.fix
    # with no other cause named, the reinstall fix stays
    raw = {"host": {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9"},
           "distributions": {"jax": "0.4.30"},
           "frameworks": {"jax": {"status": "error", "stderr": "ImportError: boom"}}}
    alone = next(f for f in run_checks(snapshot_from_raw(raw)) if f.id == "framework.import-failed")
    assert "--force-reinstall jax" in alone.fix


def test_an_intel_mac_without_torch_is_told_the_last_release_it_has() -> None:
    case = next(c for c in ROUND2 if c["url"].endswith("pytorch/issues/161614"))
    f = next(f for f in run_checks(snapshot_from_raw(case["raw"]))
             if f.id == "platform.last-release")
    assert f.fix == "pip install 'torch==2.2.2' 'numpy<2'"  # the case has NumPy 2.1.0
    arm = dict(case["raw"], host=dict(case["raw"]["host"], machine="arm64"))
    assert "platform.last-release" not in {f.id for f in run_checks(snapshot_from_raw(arm))}

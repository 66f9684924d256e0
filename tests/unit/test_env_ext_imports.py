"""package.extension-import-fails: what the probe worker recorded importing a framework's
extensions, as findings whose fix follows the kind of error (issue 24). The worker's side
runs for real in tests/integration/test_doctor.py (a real JAX probe with a broken and a
crashing package)."""

from __future__ import annotations

from devicebench.env.checks import load_knowledge
from devicebench.env.checks.ext_imports import check_extension_imports
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

KB = load_knowledge()


def _snap(fw: str, version: str, errors: dict[str, str], **dists: str) -> EnvSnapshot:
    return EnvSnapshot(distributions={fw: version, **dists}, frameworks={
        fw: FrameworkProbe(name=fw, version=version, extra={"extension_errors": errors})})


def _found(snap: EnvSnapshot):
    return {f.title.split(" fails")[0]: f for f in check_extension_imports(snap, KB)}


def test_each_kind_of_error_gets_its_fix():
    found = _found(_snap("torch", "2.4.0+cu121", {
        "torch_scatter": "OSError: libtorch_scatter.so: undefined symbol: _ZN3c1017RegisterOps",
        "dgl": "ModuleNotFoundError: No module named 'torchdata'",
        "mmcv._ext": "ImportError: DLL load failed while importing _ext"},
        **{"torch-scatter": "2.1.2", "dgl": "2.4.0", "mmcv": "2.1.0"}))
    scatter = found["torch-scatter 2.1.2"]
    assert scatter.severity == "warning" and "after PyTorch 2.4.0+cu121" in scatter.title
    assert "build made for torch 2.4.0+cu121" in scatter.fix
    assert found["dgl 2.4.0"].fix.startswith("pip install torchdata  # dgl imports it")
    assert found["mmcv 2.1.0"].fix.startswith("reinstall mmcv for torch 2.4.0+cu121")


def test_a_removed_framework_name_asks_for_the_matching_release():
    f, = check_extension_imports(_snap("jax", "0.4.24", {
        "dynamax": "AttributeError: module 'jax.random' has no attribute 'KeyArray'"},
        dynamax="0.1.4"), KB)
    assert f.title.startswith("dynamax 0.1.4 fails to import after JAX 0.4.24")
    assert "`jax.random` has no `KeyArray` in 0.4.24" in f.fix


def test_a_known_torch_extension_with_a_missing_symbol_is_left_to_its_own_rule():
    snap = _snap("torch", "2.3.0", {
        "flash_attn_2_cuda": "ImportError: flash_attn_2_cuda.so: undefined symbol: _ZN3c104c"},
        **{"flash-attn": "2.5.8"})
    assert check_extension_imports(snap, KB) == []


def test_nothing_recorded_nothing_said():
    assert check_extension_imports(_snap("torch", "2.4.0", {}), KB) == []
    assert check_extension_imports(EnvSnapshot(), KB) == []

"""The installed packages' own requirements ("pip check", issue 24): a real conflict is
reported with both versions, the requirement and a fix; satisfied requirements, markers that
exclude the recorded platform and extras not installed stay silent; old recordings without
``requires`` replay unchanged; a real recording of this project's CPU VM stays silent."""

from __future__ import annotations

import json
from pathlib import Path

from packaging.specifiers import SpecifierSet

from devicebench.env.checks import run_checks
from devicebench.env.checks.pip_check import check_pip_requirements, compact
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.probe import read_requirements

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
IDS = ("install.requirement-conflict", "install.requirement-missing")


def _raw(system: str = "Linux", machine: str = "x86_64", python: str = "3.11.8",
         distributions: dict | None = None, requires: dict | None = None) -> dict:
    doc = {"host": {"system": system, "machine": machine, "python_version": python,
                    "python_implementation": "CPython"},
           "distributions": distributions or {}}
    if requires is not None:
        doc["requires"] = requires
    return doc


def _pip(doc: dict) -> list:
    return [f for f in run_checks(snapshot_from_raw(doc)) if f.id in IDS]


def _alone(doc: dict) -> list:
    """The pip check by itself: pairs that a knowledge rule names too (keras beside TF,
    tensorflow-io's pairing: round 9) are left out of run_checks by drop_covered."""
    from devicebench.env.checks import load_knowledge

    return [f for f in check_pip_requirements(snapshot_from_raw(doc), load_knowledge())
            if f.id in IDS]


def test_a_keras_outside_tensorflows_requirement_is_named_with_both_versions() -> None:
    doc = _raw(distributions={"tensorflow": "2.15.0", "keras": "2.6.0", "numpy": "1.26.2"},
               requires={"tensorflow": ["keras<2.16,>=2.15.0", "numpy<2.0.0,>=1.23.5"]})
    assert _pip(doc) == [] and "keras.keras2-release-not-tf" in [  # a rule names the pair
        f.id for f in run_checks(snapshot_from_raw(doc))]
    [f] = _alone(doc)
    assert f.id == "install.requirement-conflict" and f.severity == "warning"
    assert "tensorflow 2.15.0" in f.title and "keras 2.6.0" in f.title
    assert "keras<2.16,>=2.15.0" in f.observed and "pip.pypa.io" in f.source
    assert f.fix.startswith("pip install 'keras>=2.15.0,<2.16'") and "keras~=2.15.0" in f.fix


def test_the_fix_is_quoted_for_windows_cmd() -> None:
    doc = _raw(system="Windows", machine="AMD64",
               distributions={"tensorflow": "2.15.0", "tensorboard": "2.6.0"},
               requires={"tensorflow": ["tensorboard<2.16,>=2.15"]})
    [f] = _pip(doc)
    assert f.fix.startswith('pip install "tensorboard>=2.15,<2.16"')


def test_an_exact_pin_on_torch_from_an_addon_is_an_error() -> None:
    doc = _raw(distributions={"torch": "2.3.0", "some-torch-ext": "1.0"},
               requires={"some-torch-ext": ["torch==2.2.2"]})
    [f] = _pip(doc)
    assert f.severity == "error" and "torch 2.3.0" in f.title and "torch==2.2.2" in f.fix


def test_an_extra_counts_only_when_its_packages_are_installed() -> None:
    reqs = {"tensorflow-io": ["tensorflow-io-gcs-filesystem==0.36.0",
                              'tensorflow<2.16.0,>=2.15.0; extra == "tensorflow"',
                              'tensorflow-gpu<2.16.0,>=2.15.0; extra == "tensorflow-gpu"']}
    dists = {"tensorflow-io": "0.36.0", "tensorflow-io-gcs-filesystem": "0.36.0"}
    assert _alone(_raw(distributions={**dists, "tensorflow-cpu": "2.16.1"}, requires=reqs)) == []
    [f] = _alone(_raw(distributions={**dists, "tensorflow": "2.16.1"}, requires=reqs))
    assert ",<2.16" in f.fix and "tensorflow-io 0.36.0" in f.title


def test_no_downgrade_is_offered_that_has_no_wheels_for_the_recorded_python() -> None:
    reqs = {"tensorflow-io": ['tensorflow<2.16.0,>=2.15.0; extra == "tensorflow"']}
    dists = {"tensorflow-io": "0.36.0", "tensorflow": "2.16.1"}
    [f] = _alone(_raw(python="3.12.3", distributions=dists, requires=reqs))
    assert "pip install 'tensorflow" not in f.fix  # TF 2.15 has no Python 3.12 wheels
    assert f.fix.startswith("install the tensorflow-io release") and "3.12" in f.fix
    [f] = _alone(_raw(python="3.11.8", distributions=dists, requires=reqs))
    assert f.fix.startswith("pip install 'tensorflow>=2.15.0,<2.16.0'")


def test_an_extra_that_only_repins_a_base_requirement_is_not_taken_as_installed() -> None:
    # jax's own metadata: an installed jaxlib is no sign of the "minimum-jaxlib" extra.
    reqs = {"jax": ["jaxlib<=0.10.2,>=0.10.1", 'jaxlib==0.10.1; extra == "minimum-jaxlib"']}
    assert _pip(_raw(distributions={"jax": "0.10.2", "jaxlib": "0.10.2"}, requires=reqs)) == []


def test_satisfied_and_platform_excluded_requirements_stay_silent() -> None:
    reqs = {"torch": ["filelock", "sympy>=1.13.3",
                      'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and '
                      'platform_machine == "x86_64"',
                      'triton==3.0.0; platform_system == "Linux" and python_version < "3.13"']}
    dists = {"torch": "2.4.0", "filelock": "3.13.1", "sympy": "1.13.3", "triton": "2.3.0"}
    # The recorded host is a Mac: neither marker holds there, whatever machine runs doctor.
    assert _pip(_raw(system="Darwin", machine="arm64", distributions=dists, requires=reqs)) == []
    # The same lines on Linux x86_64: both hold (triton too old, the cuDNN wheel missing).
    found = _pip(_raw(distributions=dists, requires=reqs))
    assert sorted(f.id for f in found) == list(IDS) and any("triton 2.3.0" in f.title
                                                            for f in found)


def test_pairs_outside_the_frameworks_are_left_to_pip() -> None:
    doc = _raw(distributions={"requests": "2.31.0", "urllib3": "1.26.0"},
               requires={"requests": ["urllib3<3,>=2"]})
    assert _pip(doc) == []


def test_a_pair_another_rule_already_names_is_not_repeated() -> None:
    doc = _raw(distributions={"tensorflow": "2.15.0", "numpy": "2.1.0"},
               requires={"tensorflow": ["numpy<2.0.0,>=1.23.5"]})
    found = run_checks(snapshot_from_raw(doc))
    assert "stack.dependency-range" in [f.id for f in found]  # the NumPy 2 rule says it
    assert [f for f in found if f.id in IDS] == []
    assert check_pip_requirements(snapshot_from_raw(doc), {})  # the check alone would


def test_recordings_without_requires_replay_unchanged() -> None:
    doc = _raw(distributions={"tensorflow": "2.15.0", "keras": "2.6.0"})
    assert snapshot_from_raw(doc).requires == {} and _pip(doc) == []


def test_compact_form_only_for_one_minor_release() -> None:
    assert compact("tensorflow", SpecifierSet(">=2.15.0,<2.16.0")) == "tensorflow~=2.15.0"
    assert compact("keras", SpecifierSet(">=2.15,<2.16")) == "keras~=2.15.0"
    assert compact("numpy", SpecifierSet(">=1.23.5,<2.0.0")) == ""
    assert compact("jaxlib", SpecifierSet("==0.4.30")) == ""


def test_the_probe_reads_requirements_as_pip_does() -> None:
    import importlib.metadata as md

    found = read_requirements()  # this interpreter's own metadata; no framework imported
    assert found["typer"] == md.requires("typer")  # typer: a dependency, always installed
    assert all(v and len(v) <= 200 for v in found.values())


def test_a_real_recording_of_the_cpu_vm_stays_silent() -> None:
    """tests/fixtures/raw/linux_cpu_vm_requires.json: every distribution and its
    Requires-Dist on this project's CPU VM (TF, JAX with its many extras, torch CPU), where
    pip check says "No broken requirements found"."""
    doc = json.loads((FIXTURES / "raw/linux_cpu_vm_requires.json").read_text("utf-8"))
    assert len(doc["requires"]) > 20
    assert check_pip_requirements(snapshot_from_raw(doc), {}) == []


def test_the_raw_document_carries_requires_and_replays_them() -> None:
    """The live raw document (host layer only, no framework imported) holds the requirements
    and snapshot_from_raw gives them back unchanged: what a recording replays is what was read."""
    from devicebench.env.probe import read_raw_environment

    doc = read_raw_environment([])
    assert doc["requires"] and snapshot_from_raw(doc).requires == doc["requires"]

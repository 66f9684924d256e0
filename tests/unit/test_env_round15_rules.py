"""Round 15's general mechanisms (issue 24). Step 0, from the fourteenth set's held-out misses
(studied after that set was scored):

* a package split into two distributions pinned to one release (``[[split_packages]]``: mlx
  and mlx-metal from MLX 0.26.5) with one half missing or at another release
  (``install.split-package-half``); the probe does not import MLX, so this reads the
  installed distributions only;
* nothing installed on a Python newer than older releases support: the fix now names the
  newest Python of every run of older releases (a project's pin lives in its requirements,
  which the snapshot does not hold).

Each stays silent where the cause is absent.
"""

from __future__ import annotations

from devicebench.env.checks import load_knowledge, run_checks
from devicebench.env.checks.frameworks import pythons_for_older_releases
from devicebench.env.interpret import snapshot_from_raw


def _mac(dists: dict) -> dict:
    return {"host": {"system": "Darwin", "machine": "arm64", "python_version": "3.12.11",
                     "mac_ver": "15.6", "proc_translated": "0", "cpu_brand": "Apple M2 Max"},
            "distributions": dists, "frameworks": {}}


def _ids(raw: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in run_checks(snapshot_from_raw(raw)):
        out.setdefault(f.id, []).append(f)
    return out


def test_mlx_without_or_beside_another_mlx_metal_is_named() -> None:
    for dists in ({"mlx": "0.29.0"}, {"mlx": "0.29.0", "mlx-metal": "0.26.3"}):
        f = _ids(_mac(dists))["install.split-package-half"][0]
        assert f.severity == "warning" and "mlx-metal" in f.title and "libmlx.dylib" in f.title
        assert "pip uninstall -y mlx mlx-metal" in f.fix and "mlx==0.29.0" in f.fix


def test_mlx_split_stays_silent_when_paired_before_the_split_or_off_macos() -> None:
    assert "install.split-package-half" not in _ids(_mac({"mlx": "0.29.0", "mlx-metal": "0.29.0"}))
    assert "install.split-package-half" not in _ids(_mac({"mlx": "0.25.2"}))
    linux = _mac({"mlx": "0.29.0"})
    linux["host"] = {"system": "Linux", "machine": "x86_64", "python_version": "3.12.3"}
    assert "install.split-package-half" not in _ids(linux)


def test_python_newer_than_old_pins_names_each_runs_newest_python() -> None:
    kb = load_knowledge()
    text = pythons_for_older_releases("3.13.7", kb)
    assert text.startswith("TensorFlow 2.16-2.19: 3.12, 2.12-2.15: 3.11, 2.10-2.11: 3.10")
    assert "PyTorch 2.2-2.4: 3.12" in text
    raw = {"host": {"system": "Linux", "machine": "x86_64", "python_version": "3.13.7"},
           "distributions": {}, "frameworks": {}}
    fix = _ids(raw)["frameworks.none"][0].fix
    assert "2.12-2.15: 3.11" in fix and "python3.12 -m venv" in fix


def test_python_within_every_release_gets_no_table() -> None:
    assert pythons_for_older_releases("3.10.12", load_knowledge()) == ""
    raw = {"host": {"system": "Linux", "machine": "x86_64", "python_version": "3.10.12"},
           "distributions": {}, "frameworks": {}}
    assert "newest Python the pin supports" not in _ids(raw)["frameworks.none"][0].fix


def _win_tf(dists: dict) -> dict:
    return {"host": {"system": "Windows", "machine": "AMD64", "python_version": "3.10.11"},
            "distributions": dists, "frameworks": {}}


def test_directml_plugin_beside_a_newer_tensorflow_cpu_is_named() -> None:
    """From round14_dev (tensorflow-directml-plugin#367): the plugin is built for
    tensorflow-cpu 2.10; an [[addon_builds]] row in the existing mechanism."""
    f = _ids(_win_tf({"tensorflow-cpu": "2.12.0",
                      "tensorflow-directml-plugin": "0.4.0.dev230202"}))
    f = f["stack.addon-built-for-other-release"][0]
    assert "tensorflow-cpu 2.10" in f.title and "tensorflow-cpu==2.10" in f.fix


def test_directml_plugin_with_its_tensorflow_cpu_stays_silent() -> None:
    for dists in ({"tensorflow-cpu": "2.10.0", "tensorflow-directml-plugin": "0.4.0.dev230202"},
                  {"tensorflow-cpu": "2.12.0"}):
        assert "stack.addon-built-for-other-release" not in _ids(_win_tf(dists))

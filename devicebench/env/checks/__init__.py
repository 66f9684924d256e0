"""Doctor's checks: pure functions ``(EnvSnapshot, knowledge) -> list[Finding]``.

Checks never probe, print or import a deep-learning framework; they read a snapshot
(live or saved on another machine) and the knowledge base in ``knowledge.toml``.

Example:
    >>> from devicebench.env.snapshot import EnvSnapshot, HostInfo
    >>> [f.id for f in run_checks(EnvSnapshot(host=HostInfo(os="Linux")))]
    ['frameworks.none']
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from collections.abc import Callable
from importlib import resources
from typing import Any

from devicebench.env.checks._util import fit_fix_to_platform, platform_conflict
from devicebench.env.checks.accelerators import (
    check_cann_torch_npu,
    check_mps_no_fallback,
    check_oneapi_sourced_beside_xpu_wheels,
    check_tf_rocm_arch_ignored,
    check_xpu_conda_libstdcxx,
    check_xpu_cpu_nightly,
)
from devicebench.env.checks.addons import (
    check_addon_builds,
    check_addon_sets_legacy_keras,
    check_backend_library_missing,
    check_keras_internal_imports,
    check_placeholder_release,
    check_split_halves,
)
from devicebench.env.checks.apple import (
    check_metal_compat,
    check_mps_macos_features,
    check_rosetta,
    check_tensorflow_macos,
    check_xla_off_apple,
)
from devicebench.env.checks.build_tags import check_build_tags
from devicebench.env.checks.clusters import (
    check_cluster_cuda_module,
    check_container_host_libcuda,
    check_driver_regression,
    check_launch_regression,
    check_library_load,
    check_library_minimum,
    check_nccl_two_versions,
    check_python_fallback,
    check_singularity_driver_libs,
)
from devicebench.env.checks.companions import (
    check_companion_broken_release,
    check_package_macos_minimum,
)
from devicebench.env.checks.ext_builds import (
    check_arch_list_excludes_gpu,
    check_conda_channel_mix,
    check_cuda_home_major,
    check_index_placeholder,
    check_jax_runtime_newer_than_driver,
    check_local_tag_torch,
)
from devicebench.env.checks.ext_imports import check_extension_imports
from devicebench.env.checks.ext_pins import check_extension_torch_build
from devicebench.env.checks.extensions import (
    check_bnb_no_rocm,
    check_extension_cuda_home,
    check_jax_plugin_driver,
    check_triton_target,
)
from devicebench.env.checks.framework_failures import check_probe_failures, defer_generic_fixes
from devicebench.env.checks.frameworks import (
    check_keras3_old_tf,
    check_keras_backend,
    check_legacy_keras,
    check_multiple_tf,
    check_no_frameworks,
    check_onednn,
    check_other_backends,
)
from devicebench.env.checks.gpu import (
    check_cuda_driver,
    check_gpu_not_seen,
    check_nvidia_smi_failed,
)
from devicebench.env.checks.host import check_blas
from devicebench.env.checks.hosting import (
    check_container_no_gpu,
    check_docker_desktop_vm,
    check_local_version_not_on_index,
    check_platform_without_wheels,
    check_sandbox,
    check_virtual_mac,
    check_wsl_container_driver_libs,
)
from devicebench.env.checks.installs import (
    check_gpu_min_compute,
    check_jax_plugin_release,
    check_ld_path_shadow_risk,
    check_loader_needs,
    check_platform_ceiling,
    check_wheel_newer_than_os,
    check_windows_dll_load,
    check_wsl_libcuda,
)
from devicebench.env.checks.lib_needs import (
    check_jax_removed_name,
    check_nvcc_on_path,
    check_open3d_windows_ml,
    check_undeclared_import,
)
from devicebench.env.checks.lib_pairs import (
    check_bitsandbytes_windows,
    check_jax_cuda_plugin_without_gpu,
    check_library_pairing,
)
from devicebench.env.checks.nvidia_builds import check_driver_insufficient
from devicebench.env.checks.pairings import (
    check_conda_cpu_build,
    check_keras2_release,
    check_keras3_addons_on_legacy,
    check_keras_two_distributions,
)
from devicebench.env.checks.pins import check_project_pins
from devicebench.env.checks.pip_check import check_pip_requirements, drop_covered
from devicebench.env.checks.ptxas_wsl import (
    check_ptxas_older_than_gpu,
    check_wsl_linux_libcuda_beside_loader,
)
from devicebench.env.checks.reported import (
    check_cudnn_loaded_older,
    check_driver_older_than_ptxas,
    check_libdevice_missing,
    check_nccl_older_than_torch,
    check_shadowed_wheel_libs,
    check_wheel_libs_not_on_path,
)
from devicebench.env.checks.rocm import (
    check_jax_not_rocm,
    check_kfd_permission,
    check_override_masks_all,
    check_rocm_arch,
    check_rocm_libs_not_on_path,
    check_torch_not_rocm,
    check_wsl1,
    check_wsl_rocm,
)
from devicebench.env.checks.rocm_builds import (
    check_rocm_release_soname,
    check_tf_not_rocm,
    check_tf_rocm_glued_targets,
)
from devicebench.env.checks.runtime_libs import (
    check_env_cxx_older,
    check_tf_system_cudnn_minor,
)
from devicebench.env.checks.said import (
    check_bundled_runtimes,
    check_extension_abi,
    check_framework_says,
    drop_said_covered,
)
from devicebench.env.checks.shared_hosts import (
    check_gpu_devices_busy,
    check_release_platform_bug,
    check_windows_compile_no_triton,
)
from devicebench.env.checks.slurm import (
    check_conda_cuda_plugin_cpu_torch,
    check_driver_limit,
    check_jax_slurm_layout,
    check_local_rank_past_visible,
)
from devicebench.env.checks.stack import (
    check_gpu_arch_in_build,
    check_jax_jaxlib,
    check_keras2_addons,
    check_mask_set_too_late,
    check_python_supported,
    check_requires,
    check_stack_skew,
    check_windows_no_gpu,
)
from devicebench.env.checks.symbols import (
    check_kernel_dso_mismatch,
    check_sibling_symbol,
    check_versioned_symbol,
)
from devicebench.env.checks.toolkits import (
    check_tf_capability_not_built,
    check_toolkit_newer_than_driver_jit,
)
from devicebench.env.checks.triton_tpu import (
    check_jax_tpu_node,
    check_torch_triton_pairing,
    check_triton_libcuda_not_found,
)
from devicebench.env.checks.unimported import (
    check_cuda_major_package,
    check_jetson_pypi_wheels,
    check_loader_path_package,
    check_prebuilt_torch_max,
    check_tensorrt_execstack,
)
from devicebench.env.checks.variants import (
    check_bnb_cuda_override,
    check_companion_variants,
    check_cpu_beside_gpu_package,
    check_gpu_build_elsewhere,
    check_mixed_cuda_major_wheels,
    check_windows_import_order,
)
from devicebench.env.checks.visibility import (
    check_cuda_build_no_driver,
    check_empty_rocm_override,
)
from devicebench.env.finding import Finding, sort_findings
from devicebench.env.snapshot import EnvSnapshot

__all__ = ["CHECKS", "Check", "load_knowledge", "run_checks"]

Check = Callable[[EnvSnapshot, dict[str, Any]], list[Finding]]

# Order matters only within a severity (sorting is stable): causes before symptoms.
CHECKS: list[Check] = [
    check_rosetta,
    check_package_macos_minimum,
    check_mps_macos_features,
    check_metal_compat,
    check_tensorflow_macos,
    check_multiple_tf,
    check_cuda_driver,
    check_driver_insufficient,
    check_kernel_dso_mismatch,
    check_nvidia_smi_failed,
    check_stack_skew,
    check_jax_jaxlib,
    check_jax_plugin_release,
    check_jax_plugin_driver,
    check_requires,
    check_companion_broken_release,
    check_addon_builds,
    check_backend_library_missing,
    check_placeholder_release,
    check_split_halves,
    check_conda_cpu_build,
    check_build_tags,
    check_windows_dll_load,
    check_windows_import_order,
    check_companion_variants,
    check_mixed_cuda_major_wheels,
    check_gpu_build_elsewhere,
    check_cpu_beside_gpu_package,
    check_bnb_cuda_override,
    check_wsl_libcuda,
    check_wsl_linux_libcuda_beside_loader,
    check_triton_libcuda_not_found,
    check_torch_triton_pairing,
    check_jax_tpu_node,
    check_extension_torch_build,
    check_library_pairing,
    check_jax_cuda_plugin_without_gpu,
    check_bitsandbytes_windows,
    check_jax_removed_name,
    check_undeclared_import,
    check_open3d_windows_ml,
    check_nvcc_on_path,
    check_nccl_older_than_torch,
    check_versioned_symbol,
    check_sibling_symbol,
    check_shadowed_wheel_libs,
    check_ld_path_shadow_risk,
    check_cudnn_loaded_older,
    check_tf_system_cudnn_minor,
    check_driver_older_than_ptxas,
    check_ptxas_older_than_gpu,
    check_triton_target,
    check_extension_cuda_home,
    check_cuda_home_major,
    check_arch_list_excludes_gpu,
    check_local_tag_torch,
    check_conda_channel_mix,
    check_jax_runtime_newer_than_driver,
    check_index_placeholder,
    check_env_cxx_older,
    check_cuda_major_package,
    check_loader_path_package,
    check_prebuilt_torch_max,
    check_tensorrt_execstack,
    check_jetson_pypi_wheels,
    check_tf_capability_not_built,
    check_toolkit_newer_than_driver_jit,
    check_gpu_devices_busy,
    check_windows_compile_no_triton,
    check_release_platform_bug,
    check_wheel_newer_than_os,
    check_wheel_libs_not_on_path,
    check_loader_needs,
    check_gpu_arch_in_build,
    check_gpu_min_compute,
    check_wsl1,
    check_kfd_permission,
    check_rocm_libs_not_on_path,
    check_torch_not_rocm,
    check_jax_not_rocm,
    check_tf_not_rocm,
    check_tf_rocm_glued_targets,
    check_rocm_release_soname,
    check_wsl_rocm,
    check_override_masks_all,
    check_empty_rocm_override,
    check_bnb_no_rocm,
    check_rocm_arch,
    check_mask_set_too_late,
    check_libdevice_missing,
    check_probe_failures,
    check_keras3_old_tf,
    check_keras_backend,
    check_legacy_keras,
    check_keras2_addons,
    check_keras_internal_imports,
    check_addon_sets_legacy_keras,
    check_keras2_release,
    check_keras_two_distributions,
    check_keras3_addons_on_legacy,
    check_windows_no_gpu,
    check_python_supported,
    check_wsl_container_driver_libs,
    check_container_no_gpu,
    check_local_version_not_on_index,
    check_cuda_build_no_driver,
    check_virtual_mac,
    check_docker_desktop_vm,
    check_sandbox,
    check_gpu_not_seen,
    check_platform_ceiling,
    check_platform_without_wheels,
    check_project_pins,
    check_no_frameworks,
    check_blas,
    check_xla_off_apple,
    check_onednn,
    check_other_backends,
    check_framework_says,
    check_extension_abi,
    check_extension_imports,  # any other extension's failed import, after the specific rules
    check_bundled_runtimes,
    check_launch_regression,
    check_driver_regression,
    check_nccl_two_versions,
    check_singularity_driver_libs,
    check_container_host_libcuda,
    check_cluster_cuda_module,
    check_library_minimum,
    check_python_fallback,
    check_library_load,
    check_local_rank_past_visible,
    check_jax_slurm_layout,
    check_driver_limit,
    check_conda_cuda_plugin_cpu_torch,
    check_xpu_conda_libstdcxx,
    check_xpu_cpu_nightly,
    check_tf_rocm_arch_ignored,
    check_mps_no_fallback,
    check_cann_torch_npu,
    check_oneapi_sourced_beside_xpu_wheels,
    check_pip_requirements,  # last: drop_covered leaves out pairs the rules above name
]


NOT_FOR_THIS_PLATFORM = "doctor withheld its fix: it names {name}, which does not exist for"


def _checked_fix(fix: str, snapshot: EnvSnapshot, kb: dict[str, Any]) -> str:
    name = platform_conflict(fix, snapshot, kb)
    if name:
        where = f"{snapshot.host.os} {snapshot.host.machine}".strip()
        return NOT_FOR_THIS_PLATFORM.format(name=name) + f" {where} (please report it)"
    return fit_fix_to_platform(fix, snapshot.host.os)


@functools.cache
def load_knowledge() -> dict[str, Any]:
    """Read and cache the knowledge base (``knowledge.toml`` shipped in this package).

    The returned dict is shared between calls: treat it as read-only.

    Example:
        >>> load_knowledge()["metal"]["recommended"]
        '1.2.0'
    """
    text = resources.files(__name__).joinpath("knowledge.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def run_checks(snapshot: EnvSnapshot, kb: dict[str, Any] | None = None) -> list[Finding]:
    """Run every registered check on a snapshot; errors first, then warnings, then info.

    Args:
        snapshot: what the probe found (live or loaded with ``load_snapshot``).
        kb: a knowledge base to use instead of the packaged one (tests).

    A check that raises (a bug, or a snapshot of an unexpected shape) becomes a
    ``doctor.check-failed`` warning instead of stopping the others.

    Example:
        >>> from devicebench.env.snapshot import EnvSnapshot, HostInfo
        >>> snap = EnvSnapshot(host=HostInfo(os="Darwin", machine="arm64", rosetta=True))
        >>> run_checks(snap)[0].id
        'env.rosetta'
    """
    knowledge = load_knowledge() if kb is None else kb
    findings: list[Finding] = []
    for check in CHECKS:
        try:
            findings.extend(check(snapshot, knowledge))
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the rest
            findings.append(
                Finding(
                    "doctor.check-failed",
                    "warning",
                    f"internal check {check.__name__} failed",
                    observed=f"{type(exc).__name__}: {exc}",
                    why="doctor could not evaluate this check; the other findings still hold.",
                    fix="report it with the snapshot: devicebench doctor --save snapshot.json",
                )
            )
    # Fixes are printed for this machine: shell syntax of its platform, and never a package
    # that does not exist for it (a check that proposed one is a bug; say so instead).
    findings = [dataclasses.replace(f, fix=_checked_fix(f.fix, snapshot, knowledge))
                for f in drop_said_covered(drop_covered(defer_generic_fixes(findings)))]
    return sort_findings(findings)

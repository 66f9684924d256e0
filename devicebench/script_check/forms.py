"""The one dispatcher of the forms written round by round (issue 24, rounds 16-25): each
form reports under an older rule's id, so none registers a rule of its own; the rule
``script.tensor-per-item`` (:mod:`.gap15_rules`) calls :func:`run_forms` once per script.

Findings are kept once per (id, line) and the first ``add`` wins, so the order below is
the order the forms ran in when each round chained the next one's (``gap16_forms`` ->
``round16_forms``, ``gap17_forms``, ...): keep it, and each form's framework guard.
"""

from __future__ import annotations

import ast

# imported first, as when the chain ran through it: it brings in vector_rules, whose rule
# (script.per-sample-python-loop) so registers before torch_rules' ones: RULES keeps its order
from devicebench.script_check import gap17_rules as g17

# isort: split
from devicebench.script_check import forms_data as data
from devicebench.script_check import forms_distributed as dist
from devicebench.script_check import forms_timing as timing
from devicebench.script_check import (
    gap16_rules as g16,
)
from devicebench.script_check import (
    gap18_rules as g18,
)
from devicebench.script_check import (
    gap19_rules as g19,
)
from devicebench.script_check import (
    gap20_rules as g20,
)
from devicebench.script_check import (
    gap21_rules as g21,
)
from devicebench.script_check import (
    gap22_rules as g22,
)
from devicebench.script_check import (
    gap23_rules as g23,
)
from devicebench.script_check import (
    gap24_rules as g24,
)
from devicebench.script_check import (
    gap25_rules as g25,
)
from devicebench.script_check import (
    round16_rules as r16,
)
from devicebench.script_check import (
    round17_rules as r17,
)
from devicebench.script_check import (
    round18_rules as r18,
)
from devicebench.script_check import (
    round18b_rules as r18b,
)
from devicebench.script_check import (
    round19_rules as r19,
)
from devicebench.script_check import (
    round20_rules as r20,
)
from devicebench.script_check import (
    round21_rules as r21,
)
from devicebench.script_check import (
    round22_rules as r22,
)
from devicebench.script_check import (
    round23b_rules as r23b,
)
from devicebench.script_check import (
    round24_rules as r24,
)
from devicebench.script_check.context import Context
from devicebench.script_check.dataflow import torch_cpu_only


def run_forms(ctx: Context) -> None:
    """Every form of rounds 16-25, in the order they ran, under their guards."""
    torch = ctx.uses("torch")
    jax = ctx.uses("jax")
    tf = ctx.uses("tensorflow")
    keras_or_tf = tf or ctx.uses("keras")
    # round 16's dev forms (corpus_round15)
    r16._sync_dist_in_training_step(ctx)  # a LightningModule file need not import torch
    if torch:
        r16._collective_per_metric(ctx)
        r16._mask_assignment_in_step(ctx)
        r16._item_per_element_in_forward(ctx)
    # round 17's step 0 (corpus_round14's held-out misses), then its dev forms
    if torch:
        g17._barrier_in_called_function(ctx)
        g17._host_reads_of_handed_values(ctx)
        g17._blocking_copy_in_index(ctx)
        g17._per_sample_loop_over_parameter(ctx)
        r17._predicate_truthiness_in_step(ctx)
        r17._table_copy_per_iteration(ctx)
    # round 18's dev forms (corpus_round17), run first by round 18's step 0
    if jax or ctx.uses("equinox"):
        r18._jit_built_per_call(ctx)
        r18._lax_loop_outside_jit(ctx)
        r18._static_object_per_iteration(ctx)
    if torch:
        r18._reduce_after_host_copy(ctx)
        r18._item_in_backward_loop(ctx)
        r18._metric_compute_per_step(ctx)
        r18._no_grad_in_inference_file(ctx)
        r18._scaler_for_bf16(ctx)
    if tf:
        r18._batch_under_global_xla(ctx)
    if torch:
        dist._no_sync_after_forward(ctx)
        dist._break_in_sync_switch(ctx)
        dist._backward_per_micro_batch_loop(ctx)
    if tf:
        r18b._tf_function_per_key(ctx)
    if ctx.uses("librosa") or ctx.uses("soundfile"):
        r18b._decoder_in_sequence(ctx)
    if jax:
        r18b._jax_per_example_helper(ctx)
        r18b._step_outputs_read_in_iteration(ctx)
    # round 18's step 0 (corpus_round16's held-out misses)
    dist._find_unused_strategy(ctx)
    if torch:
        g18._graph_breaks(ctx)
        g18._mask_assignment_in_forward_helper(ctx)
    if jax:
        g18._host_arrays_into_jit(ctx)
        g18._inline_jit_in_traced(ctx)
        g18._accumulation_loop_in_jit(ctx)
    if tf:
        g18._tf_function_defined_per_call(ctx)
        g18._parse_map_before_batch(ctx)
    # round 19's step 0 (corpus_round17's held-out misses)
    if torch:
        g19._gradscaler_bf16_choice(ctx)
        g19._cudnn_benchmark_at_import(ctx)
        data._eval_hook_loaders(ctx)
        g19._compiled_step_with_scheduler(ctx)
    if keras_or_tf:
        g19._eager_eval_loop(ctx)
        g19._model_factory_in_loop(ctx)
        g19._sequence_threads(ctx)
    if jax:
        g19._optimizer_static_arg(ctx)
        g19._closure_transform_per_call(ctx)
        g19._debug_callback_traced(ctx)
        g19._flax_item_and_apply(ctx)
        g19._shape_loops_in_jit(ctx)
        g19._random_in_loader(ctx)
    # round 19's dev forms (corpus_round18)
    if torch:
        r19._torch_syncs(ctx)
        r19._loops_over_tensors(ctx)
        r19._ema_chain(ctx)
        r19._sharded_scaler(ctx)
        r19._tensor_of_list(ctx)
        r19._numpy_index_copy(ctx)
        r19._compiled_per_parameter(ctx)
    if keras_or_tf:
        r19._summary_in_batch_hook(ctx)
        r19._map_func_keyword(ctx)
    # round 20's step 0 (corpus_round18's held-out misses)
    if tf:
        g20._vectorizable_map_before_batch(ctx)
    if torch:
        g20._keyword_copies(ctx)
        for c in ctx.calls():
            g20._per_batch_call(ctx, c)
        g20._slices_by_tensor_elements(ctx)
    # round 20's dev forms (corpus_round19)
    if torch:
        r20._ping_pong(ctx)
        r20._element_sized_factory(ctx)
        r20._item_in_loop(ctx)
        r20._host_cast_and_frames(ctx)
        r20._moved_then_buffered(ctx)
        r20._tensor_undone_by_caller(ctx)
        timing._cpu_timer_class(ctx)
    if jax:
        r20._jit_wrapper_of_closure(ctx)
        r20._jnp_on_data_path(ctx)
    # round 21's step 0 (corpus_round19's held-out misses)
    if tf:
        g21._estimator_per_call(ctx)
        g21._boolean_mask_in_layer(ctx)
    if torch:
        for c in ctx.calls():
            g21._call_form(ctx, c)
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                g21._assign_form(ctx, n)
            elif isinstance(n, (ast.If, ast.While)):
                g21._reduction_test(ctx, n)
        g21._cycled_copies(ctx)
        g21._float_in_dataset(ctx)
    # round 21's dev forms (corpus_round20)
    if jax:
        r21._jit_left_unused(ctx)
        r21._jit_in_callback(ctx)
    if ctx.uses("equinox"):
        r21._static_field_rewritten(ctx)
    if ctx.uses("datasets"):
        r21._tokenizer_map_unbatched(ctx)
    if torch:
        r21._index_by_device_element(ctx)
        r21._syncing_callee_per_element(ctx)
        r21._slices_and_masks_in_loop(ctx)
        r21._branch_on_device_parameter(ctx)
    # round 22's step 0 (corpus_round20's held-out misses)
    if jax:
        g22._numpy_closed_over(ctx)
        g22._unjitted_transform(ctx)
    # a Trainer subclass may import no torch itself (huggingface/trl#2902)
    if any(ctx.uses(m) for m in ("torch", "transformers", "trl", "accelerate")):
        devices = g22._device_attrs(ctx)
        for c in ctx.calls():
            g22._call_form(ctx, c)
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
                g22._subscript_form(ctx, n, devices)
            elif isinstance(n, (ast.If, ast.While)):
                g22._reduction_compare(ctx, n)
            elif isinstance(n, ast.For):
                g22._row_by_row_grad(ctx, n)
        g22._compiled_over_graphs(ctx)
    # round 23's step 0 (corpus_round21's held-out misses)
    if jax:
        g23._nested_range_in_jit(ctx)
    if torch:
        g23._per_step_calls(ctx)
    # round 22's dev forms (corpus_round21)
    if jax:
        r22._jit_fed_appended_lists(ctx)
    if torch:
        r22._blocking_loader_copy(ctx)
        r22._sync_before_side_stream(ctx)
        r22._barrier_in_callee_per_item(ctx)
        data._pin_memory_param_off(ctx)
        r22._list_tensor_per_batch(ctx)
        dist._backward_per_split_chunk(ctx)
        r22._bare_compile_batch_shapes(ctx)
    # round 23's dev forms (corpus_round22), the late ones (round23b) first
    torch_or_hf = torch or ctx.uses("transformers")
    if jax:
        r23b.lax_map_fresh_closure(ctx)
        r23b.jit_loop_under_vmap(ctx)
    if torch_or_hf:
        r23b._zip_comprehension_then_cat(ctx)
        r23b._grad_on_in_eval_steps(ctx)
        r23b._gather_in_trainer_step(ctx)
        r23b._item_per_tensor_element(ctx)
        r23b._index_search_per_item(ctx)
        r23b._per_param_optimizer_loop(ctx)
        dist._no_sync_around_backward_only(ctx)
        r23b._host_tensor_in_loop_helper(ctx)
        r23b._per_datum_grad_loop(ctx)
        data._training_args_no_workers(ctx)
        data._loader_kwargs_never_set(ctx)
        data._loader_of_looping_dataset(ctx)
        data._pandas_row_in_getitem_helper(ctx)
        data._returned_loader_respawn(ctx)
    # round 24's step 0 (corpus_round22's held-out misses)
    if jax:
        g24._jnp_append_in_loop(ctx)
        g24._apply_updates_outside_jit(ctx)
    if torch:
        g24._callback_hook_syncs(ctx)
        g24._trainer_cpu_reductions(ctx)
        g24._gather_in_step_callee(ctx)
        g24._host_round_trip(ctx)
        g24._builtin_minmax_of_sum(ctx)
        g24._cpu_numpy_comprehension_in_step(ctx)
    # round 24's dev forms (corpus_round23)
    if jax:
        timing._unblocked_warmup(ctx)
        timing._call_timer_instances(ctx)
    if ctx.uses("keras") or tf:
        r24._predict_in_loop_callee(ctx)
    if any(ctx.uses(lib) for lib in r24._GPU_ARRAYS):
        r24._tiny_gpu_arrays(ctx)
    if torch:
        r24._module_call_per_row(ctx)
        if not torch_cpu_only(ctx):
            timing._timed_received_module(ctx)
    # round 25's step 0 (corpus_round23's held-out misses)
    if any(ctx.uses(lib) for lib in timing._GPU_ARRAYS):
        timing._gpu_array_class_timer(ctx)
    if jax:
        timing._tick_timer_around_jit(ctx)
    if ctx.uses("mlx"):
        timing._cold_generator_timed(ctx)
    if ctx.uses("keras") or tf:
        g25._predict_one_sample_in_loop(ctx)
    data._capped_workers(ctx)
    if torch:
        timing._elapsed_before_sync(ctx)
        timing._mark_step_timed(ctx)
        timing._timed_param_on_device_input(ctx)
    # round 16's step 0 (corpus_round14's held-out misses), run after the others
    g19.unpinned_siblings(ctx)
    if torch:
        g16._loader_over_cuda_dataset(ctx)
        g16._host_made_in_step_loop(ctx)
        g16._literal_tensor_per_forward(ctx)

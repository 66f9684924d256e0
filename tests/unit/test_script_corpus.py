"""The script check on issue 24's corpus: recall at the right line and false alarms, per half.

The corpus (tests/fixtures/scripts/corpus/README.md) was split by a hash of each source URL
and committed before any rule was written for it; rules were written against the ``dev`` half
only, and the ``heldout`` half was measured once, untouched (11/27, 3 false alarms). Later
rules were written with its misses in view, so its figure today is no longer a held-out one;
the ``fresh`` set, collected after the rules were frozen, is the untouched figure. The
figures printed here (``-s``) are the ones reported; the assertions only guard against a
regression from what was measured.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devicebench.script_check import inspect_script
from tests.unit.script_corpus_judge import marked_lines, statement_keys
from tests.unit.test_script_rules import mac_snapshot

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "scripts" / "corpus"
SPLIT: dict[str, dict[str, str]] = json.loads((CORPUS / "split.json").read_text())
FRESH = CORPUS.parent / "corpus_fresh"  # collected after the rules were frozen
NEW = CORPUS.parent / "corpus_new"  # the second round: split by a fixed seed (its README)
NEW_SPLIT: dict[str, dict[str, str]] = json.loads((NEW / "split.json").read_text())
ROUND2 = CORPUS.parent / "corpus_round2"  # the third collection (its README)
ROUND2_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND2 / "split.json").read_text())
ROUND3 = CORPUS.parent / "corpus_round3"  # the fourth collection (its README)
ROUND3_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND3 / "split.json").read_text())
ROUND4 = CORPUS.parent / "corpus_round4"  # the fifth collection (its README)
ROUND4_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND4 / "split.json").read_text())
ROUND5 = CORPUS.parent / "corpus_round5"  # the sixth collection (its README)
ROUND5_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND5 / "split.json").read_text())
ROUND6 = CORPUS.parent / "corpus_round6"  # the seventh collection (its README)
ROUND6_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND6 / "split.json").read_text())
ROUND7 = CORPUS.parent / "corpus_round7"  # the eighth collection (its README)
ROUND7_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND7 / "split.json").read_text())
ROUND8 = CORPUS.parent / "corpus_round8"  # the ninth collection (its README)
ROUND8_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND8 / "split.json").read_text())
ROUND9 = CORPUS.parent / "corpus_round9"  # the tenth collection (its README)
ROUND9_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND9 / "split.json").read_text())
ROUND10 = CORPUS.parent / "corpus_round10"  # the eleventh collection (its README)
ROUND10_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND10 / "split.json").read_text())
ROUND11 = CORPUS.parent / "corpus_round11"  # the twelfth collection (its README)
ROUND11_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND11 / "split.json").read_text())
ROUND12 = CORPUS.parent / "corpus_round12"  # the thirteenth collection (its README)
ROUND12_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND12 / "split.json").read_text())
ROUND13 = CORPUS.parent / "corpus_round13"  # the fourteenth collection (its README)
ROUND13_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND13 / "split.json").read_text())
ROUND14 = CORPUS.parent / "corpus_round14"  # the fifteenth collection (its README)
ROUND14_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND14 / "split.json").read_text())
ROUND15 = CORPUS.parent / "corpus_round15"  # the sixteenth collection (its README)
ROUND15_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND15 / "split.json").read_text())
ROUND16 = CORPUS.parent / "corpus_round16"  # the seventeenth collection (its README)
ROUND16_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND16 / "split.json").read_text())
ROUND17 = CORPUS.parent / "corpus_round17"  # the eighteenth collection, issue 24's large round
ROUND17_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND17 / "split.json").read_text())
ROUND18 = CORPUS.parent / "corpus_round18"  # the nineteenth collection (its README)
ROUND18_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND18 / "split.json").read_text())
ROUND19 = CORPUS.parent / "corpus_round19"  # the twentieth collection (its README)
ROUND19_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND19 / "split.json").read_text())
ROUND20 = CORPUS.parent / "corpus_round20"  # the twenty-first collection (its README)
ROUND20_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND20 / "split.json").read_text())
ROUND21 = CORPUS.parent / "corpus_round21"  # the twenty-second collection (its README)
ROUND21_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND21 / "split.json").read_text())
ROUND22 = CORPUS.parent / "corpus_round22"  # the twenty-third collection (its README)
ROUND22_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND22 / "split.json").read_text())
ROUND23 = CORPUS.parent / "corpus_round23"  # the twenty-fourth collection (its README)
ROUND23_SPLIT: dict[str, dict[str, str]] = json.loads((ROUND23 / "split.json").read_text())
_PITFALL = re.compile(r"#\s*pitfall:\s*([\w.\-|]+)")
# Measured on this branch. Before any rule: dev 1/20 with 3 false alarms, heldout 5/27 with 2.
# Rules written against dev only, heldout measured once, untouched: dev 17/20 + 2, heldout
# 11/27 + 3 (commit fba0766) -- the honest held-out figure. The rules added after that
# (cuDNN autotuning, growing arrays, model never moved, MPS device choice, syncs in called
# functions, ...) were written with the held-out misses in view, so the heldout figures
# below are no longer held-out; the "fresh" half (collected after the rules were frozen)
# is: measured once, after its commit (51e5b6b), at 4/17 with 1 false alarm -- its untouched
# figure. That alarm was a rule bug (jnp.full's fill value read as a shape), fixed after it
# was seen: 4/17 with 0 since. A change that finds fewer pitfalls or raises more alarms fails.
# half -> (pitfalls found, false alarms)
# Second round (corpus_new, split by a fixed seed before any rule): new_dev before any rule
# 2/14 with 3 false alarms; the program-analysis rules (dataflow.py, loop_rules.py, ...) were
# written against dev, heldout, fresh and new_dev only. fresh's 2 alarms are the unsynced
# timing loops of mlxbench_21/pytorch_177765 reported at the loop header, one line above the
# expert's line (the convention real/ asserts); counted as a miss and an alarm each.
# new_heldout was never read while writing rules and the check never ran on it until the
# rules were frozen (commit 499f301); measured once then: 7/16 with 4 false alarms (the
# rules before this round, commit 424ae7b, give it 5/16 with 2) -- the
# untouched figure. Its floor below is that measurement; no rule was changed after it.
# Third round (this file's judge and corpus_round2): one line convention for every set,
# stated in tests/unit/script_corpus_judge.py (the statement of the costly call; a function
# to compile: its def; judged by statement). Under it the eager-step marks of tf_35928,
# tfdocs_871, tf_48844, margarine_20 and syngen_566 moved from the `with GradientTape` line
# to the def, and jax_1797's from its loop header to the timed call; real/'s three
# loop-header timing marks likewise. Before this round's rules (1108e9e, old judge): dev 17/20
# + 2 alarms, heldout 26/27 + 3, fresh 12/17 + 2, new_dev 13/14 + 2, new_heldout 7/16 + 4,
# round2_dev 3/15 + 0. new_heldout is dev material now (its misses were read and generalised).
# Rules then written against every set but round2_heldout, frozen at 05d7754; round2_heldout
# (never checked before) measured once there: 8/16 with 2 false alarms -- the untouched
# figure, and its floor below; no rule was changed after it.
# Fourth round (corpus_round3, split by random.Random(26) before any rule; round2_heldout
# dev material from now on): the serial tf.data map rule also flags tfdocs_128's
# `.map(load_and_preprocess)` (true -- TensorFlow's tutorial later parallelised it -- but the
# review thread names only repeat-before-shuffle: counted as a false alarm, heldout 2 -> 3).
# Rules written against every set but round3_heldout, frozen at 2f9fbe0; round3_heldout
# (never checked before) measured once there: 11/20 with 2 false alarms -- the untouched
# figure, and its floor below; no rule was changed after it.
# Fifth round (corpus_round4, split by random.Random(27) before any rule; round3_heldout dev
# material from now on): timers built as classes, comprehensions as loops, custom autograd
# backward, DataLoader pin_memory (round3_heldout 11/20 -> 18/20, 2 alarms), and rules written
# against round4_dev (2/16 with 4 alarms before -> 16/17 with 3; ignite_2977 gained the
# autocast mark its thread names). Rules frozen at 45321d8; round4_heldout (never checked
# before) measured once there: 8/18 with 4 false alarms -- the untouched figure, and its floor
# below (the rules before this round give it 7/18 with 1); no rule was changed after it.
# Sixth round (corpus_round5, split by random.Random(28) before any rule; round4_heldout dev
# material from now on): rules written against round5_dev (7/22 with 1 false alarm at its
# first measurement; 8/23 with 0 once jaxmps_180 gained the warm-up mark its PR names) and the
# seen sets: 22/23 with 0 (round4_heldout 8/18 + 4 -> 17/18 + 1, round3_heldout 2 -> 1 alarm).
# Two rules and one branch drafted while collecting, for pitfalls the split then put only in
# round5_heldout, were removed before the freeze (corpus_round5/README.md). Rules frozen at
# 6700dcf; round5_heldout (never checked before) measured once there: 7/22 with 5 false
# alarms -- the untouched figure, and its floor below (the rules before this round give it
# 5/22 with 5); no rule was changed after it.
# Seventh round (corpus_round6, split by random.Random(29) before any rule; round5_heldout
# dev material from now on): rule bugs behind seen alarms fixed and the general classes
# round5_heldout missed written (round5_heldout 7/22 + 5 -> 21/22 + 1; insitubatch_88's mark
# gained the id of the rule round 2 wrote for the same code, corpus_round6/README.md), then
# rules written against round6_dev (7/23 with 6 false alarms before -> 23/23 with 1).
# Rules frozen at e911873; round6_heldout (never checked before) measured once there: 2/18
# with 1 false alarm -- the untouched figure, and its floor below (the rules before this
# round, 5718a52, give it 1/18 with 3); no rule was changed after it.
# Eighth round (corpus_round7, split by random.Random(30) before any rule; round6_heldout
# dev material from now on): shared program analysis (script_check/kinds.py: what runs
# repeatedly, Python lists built element by element, loop-carried names; sync_flow.py: device
# values followed into callees) and rules on it, written against round7_dev (6/18 with 3
# false alarms before -> 19/19 with 0; two dev marks moved or added after the first check,
# corpus_round7/README.md) and the seen sets (round6_heldout 2/18 -> 16/18, round3_heldout
# 18 -> 20/20, round4_heldout 17 -> 18/18; earlier halves' alarms 16 -> 16). Four forms
# drafted with round7_heldout's files in mind were removed before the freeze. Rules frozen at
# 08a602b; round7_heldout (never checked before) measured once there: 6/20 with 0 false
# alarms -- the untouched figure, and its floor below (the rules before this round,
# e320148, give it the same 6/20 with 0); no rule was changed after it.
# Ninth round, step 0 (before corpus_round8 was collected; round7_heldout dev material from
# now on): three rule families (script_check/name_rules.py: attributes a framework does not
# have, from a shipped names snapshot; item_rules.py: per-item framework calls in data-sized
# loops; hot_rules.py: hot op chains left uncompiled). round7_heldout 6/20 -> 12/20 with 0
# (four of its marks gained the family's id beside the id the collection named).
# Ninth round (corpus_round8, split by random.Random(32) before any rule): rules written
# against round8_dev (3/20 with 0 false alarms before -> 16/21 with 0; deepmd_3361 gained
# the mark of its second mask line after the first check, corpus_round8/README.md) and the
# seen sets (no floor lowered, no alarm added). Rules frozen at a30bc26; round8_heldout
# (never checked before) measured once there: 2/19 with 0 false alarms -- the untouched
# figure, and its floor below (the rules before this round, 4c276f2, give it 1/19 with 0);
# no rule was changed after it.
# Tenth round, step 0 (before corpus_round9 was collected; round8_heldout dev material from
# now on): the frameworks' own performance guides listed item by item
# (tests/fixtures/scripts/guides.md) and rules for the statically visible items no rule
# covered (script_check/guide_torch.py, guide_jax_tf.py; all info): round8_dev 16 -> 17/21,
# round8_heldout 2 -> 6/19, no alarm added. Tenth round (corpus_round9, split by
# random.Random(33) before any rule): rules written against round9_dev (2/13 with 0 false
# alarms at its first check, with the step-0 rules -> 13/13 with 0) and the seen sets (no
# floor lowered, no alarm added). Rules frozen at 6c4f736; round9_heldout (never checked
# before) measured once there: 1/15 with 3 false alarms -- the untouched figure, and its
# floor below (the rules before this round, 2c4b444, and the step-0 rules, 6504ef8, give it
# the same 1/15 with 3); no rule was changed after it. After scoring, one rule bug its
# false alarms showed was mended (the lead, with round9_heldout seen from then on):
# script.mlx-no-eval counted `tokens` as unevaluated where `mx.async_eval(y)` evaluates
# it, `y` being computed from it (mlx_rules._feeding) -> 1/15 with 2; no other set moved.
# Eleventh round, step 0 (before corpus_round10 was collected): the seen misses of rounds
# 6-9 grouped by the analysis gap behind them, and the forms the largest groups need
# (script_check/form_rules.py; collate classes and list literals in kinds.py; models
# compiled by parameter in compile_rules.py): round7_heldout 13 -> 15/20, round9_heldout
# 1 -> 7/15, no other set moved, no alarm added.
# Eleventh round (corpus_round10, split by random.Random(34) before any rule): rules
# written against round10_dev (6/13 with 1 false alarm at its first check, step-0 rules
# included -> 13/13 with 1) and the seen sets (none moved). Rules frozen at 0d6c5d3;
# round10_heldout (never checked before) measured once there: 4/13 with 0 false alarms --
# the untouched figure, and its floor below (the rules before this round, da3204f, and the
# step-0 rules, 01bee57, give it 3/13 with 0); no rule was changed after it.
# Twelfth round, step 0 (before corpus_round11 was collected; round10_heldout dev material
# from now on): the seen misses grouped by the analysis gap behind them, and the forms the
# general groups need (script_check/gap_rules.py: static arguments of unhashable kind,
# Lightning's train_dataloader() as the loader Trainer.fit iterates per epoch, Accelerate's
# accelerator.device as the GPU; a clock read inside a warm-up conditional in
# timing_rules._clock_pairs) and two kinds no rule knew (iterator-per-step,
# pandas-in-getitem): round10_heldout 4 -> 9/13, round8_heldout 6 -> 7/19, no other set
# moved, no alarm added.
# Twelfth round (corpus_round11, split by random.Random(35) before any rule): rules written
# against round11_dev (4/11 with 2 false alarms at its first check, the rules before this
# round, f2098fd, and the step-0 rules, ff4cd70, alike -> 10/11 with 1) and the seen sets
# (none moved, no alarm added). Rules frozen at 1b255ad; round11_heldout (never checked
# before) measured once there: 1/12 with 2 false alarms -- the untouched figure, and its
# floor below (the rules before this round, f2098fd, and the step-0 rules, ff4cd70, give it
# the same 1/12 with 2); no rule was changed after it.
# Thirteenth round, step 0 (before corpus_round12 was collected; round11_heldout dev material
# from now on): its misses written generally (script_check/gap13_rules.py): a host value
# taken inside a helper's return and passed on to another call, rows unpacked by zip(*...)
# and lists followed through parameters, Python loops over a device tensor's rows in a
# callee, and four kinds no rule knew (no_grad in a script that never trains, Keras 2
# steps_per_epoch given a sample count, MONAI CacheDataset's copy_cache, a float cast before
# the device copy): round11_heldout 1 -> 9/12, no other set moved, no alarm added.
# Thirteenth round (corpus_round12, split by random.Random(36) before any rule; committed at
# fbc4420): round12_dev at its first check 2/11 with 2 false alarms (the step-0 rules
# included); vame_220's two other per-batch `.item()` lines, which its PR names with the
# first ("~10x per batch") and which were the two alarms, gained marks after that check.
# Rules written against round12_dev (script_check/round12_rules.py) -> 13/13 with 0; no seen
# set moved, no alarm added. Rules frozen at b50c4b5; round12_heldout (never checked before)
# measured once there: 3/11 with 2 false alarms -- the untouched figure, and its floor below
# (the rules before this round, 6437f57, and the step-0 rules, 5f96465, give it the same 3/11
# with 2); no rule was changed after it.
# Fourteenth round, step 0 (before corpus_round13 was collected; round12_heldout dev material
# from now on): its misses written generally (script_check/gap14_rules.py: what a forward
# runs, collators handed to a Trainer; vector_rules.loss_method_loops: a loss method the
# loop back-propagates; Context.runs_compiled: a state-carrying step compiled inline;
# dataflow.param_constant: a compile option given by a parameter every caller sets) and two
# kinds no rule knew (host-built-in-forward, pad-in-collator). ppobeginners_21's two other
# torch.tensor(batch_...) lines, which its PR names with the first and which were the two
# alarms, gained marks: round12_heldout 3/11 + 2 -> 12/13 + 0; no other set moved, no alarm
# added.
# Fourteenth round (corpus_round13, split by random.Random(37) before any rule; committed at
# d76a30b): round13_dev at its first check 2/13 with 3 false alarms (the step-0 rules
# included). Two dev paraphrases were mended after that check, each to what its source shows
# (weathergen_2551 never built the EMA object it updates; fairchem_2203 never called the
# per_structure reduction it defines). Rules written against round13_dev
# (script_check/round13_rules.py; shape_sync: torch.all truth tests, mask parameters, torch
# module methods; sync_flow.host_bound) -> 13/13 with 1 (rfbnet_10's per-image test loop,
# true but not named by its thread); no seen set moved, no alarm added. Rules frozen at
# f5e9458; round13_heldout (never checked before) measured once there: 5/12 with 1 false
# alarm -- the untouched figure, and its floor below (the rules before this round, b45fb4c,
# and the step-0 rules, c7c017a, give it 4/12 with 1); no rule was changed after it.
# Fifteenth round, step 0 (before corpus_round14 was collected; round13_heldout dev material
# from now on): its misses written generally (script_check/gap15_rules.py: methods a step
# loop calls on an object built elsewhere, found by a method name one class defines, followed
# three calls deep; loss attributes read through getattr; two kinds no rule knew,
# tensor-per-item and pil-convert-per-item; blocking copies to a device the file does not
# name, followed through parameters three calls deep, and the loaders that feed them):
# round13_heldout 5/12 -> 12/12 with 1 (vision_407's unnamed num_workers); no other
# set moved, no alarm added.
# Fifteenth round (corpus_round14, split by random.Random(38) before any rule; committed at
# f55e3cc): round14_dev at its first check 7/12 with 1 false alarm (the step-0 rules
# included; jax_16916's apply_updates line, part of the un-jitted step its thread names but
# not marked). Rules written against round14_dev (script_check/round15_rules.py; gap15's
# batch copies through a dict's parts) -> 11/12 with 1; no seen set moved, no alarm added.
# Rules frozen at 9ce9bea; round14_heldout (never checked before) measured once there: 6/13
# with 0 false alarms -- the untouched figure, and its floor below (the rules before this
# round, e68e045, and the step-0 rules, 5609d04, give it the same 6/13 with 0); no rule was
# changed after it.
# Sixteenth round, step 0 (before corpus_round15 is collected; round14_heldout dev material
# from now on): its analysis gaps written generally (script_check/gap16_rules.py): an unpinned
# loader over a data set that copies to the GPU, host-made tensors copied in a step loop and
# what it calls, a literal torch.tensor(..., device=) per forward -> round14_heldout 6/13 ->
# 9/13 with 0; no other seen set moved, no alarm added.
# Sixteenth round (corpus_round15, split by random.Random(39) before any rule; committed at
# 3555b8e): round15_dev at its first check 7/13 with 0 false alarms (step-0 rules, 3b6924c).
# Rules written against round15_dev (script_check/round16_rules.py) -> 13/13 with 0; no seen
# set moved, no alarm added. Rules frozen at b634457; round15_heldout (never checked before)
# measured once there: 10/17 (59%) with 3 false alarms -- the untouched figure, and its
# floor below; no rule was changed after it.
# Seventeenth round, step 0 (before corpus_round16 is collected; round15_heldout dev material
# from now on): its misses written generally (script_check/gap17_rules.py: a device barrier in
# a method a step loop calls, .item()/.tolist() of what a loop hands a method, a blocking copy
# inside an index, per-sample loops indexing values computed from a forward's inputs; and
# jax_rules: an update outside pmap reported at the update statement when the gradient is
# compiled) -> round15_heldout 10/17 + 3 -> 17/17 + 2; no other seen set moved, no alarm added.
# Seventeenth round (corpus_round16, split by random.Random(40) before any rule; committed at
# f6c26f6): round16_dev at its first check 10/12 with 1 false alarm (step-0 rules, 6b91977;
# fairchem_2193's `t.item()` of the all-reduced count, part of the pitfall its PR names but
# not marked). Rules written against round16_dev (script_check/round17_rules.py) -> 12/12
# with 1; no seen set moved, no alarm added. Rules frozen at 01e2ca1; round16_heldout (never
# checked before) measured once there: 4/12 (33%) with 3 false alarms -- the untouched figure,
# and its floor below (the rules before this round, a06f219, and the step-0 rules, 6b91977,
# give it the same 4/12 with 3); no rule was changed after it.
# Eighteenth round, step 0 (before corpus_round17 is collected; round16_heldout dev material
# from now on): its misses written generally (script_check/gap18_rules.py: graph-breaking
# calls and data-dependent branches in compiled code, loop-invariant host NumPy data handed
# to a jitted function, an inline jax.jit in traced code, Lightning's find-unused strategy
# string, a nested @tf.function in a function called per loop or map, a single-record parse
# mapped before batch, a boolean-mask assignment in a helper every forward runs, a gradient-
# accumulation range loop inside jax.jit) -> round16_heldout 4/12 + 3 -> 12/12 + 3; no other
# seen set moved, no alarm added.
# Eighteenth round (corpus_round17, issue 24's large round: 40 files, split by
# random.Random(41) before any rule; committed at c1f68ed): round17_dev at its first check
# 5/27 with 2 false alarms (step-0 rules, 699342b: coordinax_785's def line,
# vggspeaker_39's fit_generator under Keras 3). Rules written against round17_dev
# (script_check/round18_rules.py, round18b_rules.py) -> 24/27 with 2; no seen set moved, no
# alarm added (their findings are added after every older rule, so none displaces one).
# Rules frozen at 0ec0261; round17_heldout (never checked before) measured once there: 6/25
# (24%) with 2 false alarms -- the untouched figure, and its floor below (the step-0 rules,
# 05f86b3, give it the same 6/25 with 2, measured after the freeze); no rule changed after it.
# Nineteenth round, step 0 (before corpus_round18 is collected; round17_heldout dev material
# from now on): its misses written generally (script_check/gap19_rules.py: GradScaler for a
# dtype chosen with bf16, eager model calls in a TF eval loop, a Keras model factory called
# per iteration, cudnn.benchmark set at import with loop-sized tensors, eval-hook loaders
# without persistent workers, a file's other unpinned loaders, an optax optimizer rebuilt as
# a jit static argument, a scheduler writing float lrs into a compiled optimizer step, jax
# transforms of a closure rebuilt per call, jax.debug callbacks in traced code, .item() in a
# Flax __call__ and its un-jitted apply, shape-bound range loops unrolled in jit, a device
# permutation in a loader, a keras Sequence fitted with thread workers) -> round17_heldout
# 6/25 + 2 -> 25/25 + 2 (both alarms true of the code, kept); reach_rules no longer counts
# jax.jit/vmap wrappers as op-by-op work (round17_dev's coordinax_785 alarm) -> round17_dev
# 24/27 + 2 -> 24/27 + 1; no other seen set moved, no alarm added.
# Nineteenth round (corpus_round18, split by random.Random(42) before any check; two
# collectors, 36 files): round18_dev at its first check (rules through step 0, 5e0ef25) 7/27
# with 2 false alarms (batchppo_56's tfdata-order, tkan_10's input-shape). Rules written
# against round18_dev and the seen sets (script_check/round19_rules.py: code a loop runs
# followed through calls and module instances; repeat_interleave without output_size,
# .nonzero(), synchronize in an event-timing loop, loops over .unique() and their element
# indices, branches on tensor reductions, loops over split pieces, mul_().add_() EMAs,
# summaries in per-batch hooks, map_func= parses before batch, ShardedGradScaler with bf16
# only, device tensors from list expressions, NumPy-indexed copies, compiled per-parameter
# steps) -> 26/27 with 2 (tkan_10's jit_compile=False left: test_script_round5 keeps it
# silent on the TF backend, where the step is still a graph); round14_dev 11 -> 12/12
# (isaaclab_778's nonzero); no other seen set moved, no alarm added (all info, added late).
# Rules frozen at 25e812f; round18_heldout (never checked before) measured once there: 8/29
# (28%) with 0 false alarms -- the untouched figure, and its floor below (the step-0 rules,
# 5e0ef25, give it 7/29 with 0, measured after the freeze: this round's map_func= form adds
# dlflow_9); no rule changed after it.
# Twentieth round, step 0 (before corpus_round19 is collected; round18_heldout dev material
# from now on): its misses written generally (script_check/gap20_rules.py: elementwise or
# batchable-parse maps before a batch, also later in the chain or on a later name; keyword
# .to(dtype=, device=) copies of batch elements; object collectives per step; .to("cpu"),
# .cpu(), .tolist() of received tensors and torch.tensor of such a list; int() of a torch
# tensor's element; repeat_interleave in forward code or in methods of an instance a loop
# passes on; slices bounded by a received tensor's elements) -> round18_heldout 8/29 + 0 ->
# 29/29 + 0; no other seen set moved, no alarm added (all info, added late).
# Twentieth round (corpus_round19, split by random.Random(43) before any check; two
# collectors, 27 files): round19_dev at its first check (rules through step 0, 2e38239) 3/18
# with 6 false alarms. Rules written against round19_dev and the seen sets
# (script_check/round20_rules.py: device ping-pong loops, factories sized by a device
# element, .item() in loops of per-batch code, host casts after .cpu() and per-frame NumPy
# arithmetic, copies made only to be buffered, jax.jit wrappers of per-call closures, CPU timer
# classes, jax.numpy on the data path, torch.tensor results copied back by their callers)
# -> 18/18 with 6 (the same 6 alarms); no seen set moved, no alarm added (all info, added late).
# Rules frozen at 9e3791a; round19_heldout (never checked before) measured once there: 7/26
# (27%) with 1 false alarm -- the untouched figure, and its floor below (the step-0 rules,
# 2e38239, give it the same 7/26 with 1, measured after the freeze); no rule changed after it.
# Twenty-first round, step 0 (before corpus_round20 is read; round19_heldout dev material
# from now on): its misses written generally (script_check/gap21_rules.py: device tensors
# indexed by Python ids per item, int()/.item() of received cache counters in forward code,
# loop-invariant .to(dtype).to(device), .cpu().numpy() per loop item, estimators built per
# predict, decoded images made float in a data set, scalars assigned through index tensors,
# tf.boolean_mask in a layer's call, torch._dynamo.reset() per iteration, minibatches copied
# per pass of a cycling iterator, torch.all/any in a Python if, device tensors written element
# by element, .cpu().<views>.float(); gap19_rules: OneCycleLR/CyclicLR cycling float betas
# into a compiled step) -> round19_heldout 7/26 + 1 -> 26/26 + 1 (finetune_188:28 kept: a
# predict per single text in a loop is true of the code); no other seen set moved, no alarm
# added (all info, added late).
# Twenty-first round (corpus_round20, split by random.Random(44) before any check; two
# collectors, 31 files): round20_dev at its first check (rules through step 0, 4e35d53) 8/19
# with 0 false alarms. Rules written against round20_dev and the seen sets
# (script_check/round21_rules.py: values followed from callers into parameters -- loop
# elements of a device tensor used as indices, device tensors whose elements an if compares
# --, functions handed over as callbacks building jax.jit, jit wrappers left unused while a
# loop calls the original, comprehensions calling a syncing helper in per-batch code,
# slices and masks of received tensors in loops, equinox static fields rewritten under
# filter_jit, tokenizer maps without batched=True) -> 19/19 with 0; no seen set moved, no
# alarm added (all info, added late).
# Rules frozen at 4774d8b; round20_heldout (never checked before) measured once there: 6/25
# (24%) with 1 false alarm (mujoco_1516:23's jax-grad-outside-jit warning) -- the untouched
# figure, and its floor below (the step-0 rules, 4e35d53, give it the same 6/25 with 1,
# measured after the freeze); no rule changed after it.
# Twenty-second round, step 0 (before corpus_round21 is read; round20_heldout dev material
# from now on): its misses written generally (script_check/gap22_rules.py: NumPy arrays
# closed over by returned jax.numpy functions, self buffers copied with .to(device=,
# dtype=) per call, device tables indexed by a parameter fed the loop's tensor element,
# torch.compile over per-iteration graphs with edge inputs, tensors indexed by a config's
# *_ids per step, jax.vmap/grad wrappers never jitted but called in a loop, Jacobians
# built row by row with autograd.grad, .item() in a Trainer subclass's per-step code,
# if/while on torch reductions in a loop, factories made on the CPU then moved in code a
# forward calls) -> round20_heldout 6/25 + 1 -> 23/25 + 1 (mujoco_1516:23 kept: the vmapped
# step does run un-jitted each iteration; the two expensive-train-metrics marks are left,
# no such rule id exists); no other seen set moved, no alarm added (all info, added late).
# Twenty-second round (corpus_round21, split by random.Random(45) before any check; two
# collectors, 19 files): round21_dev at its first check (rules through step 0, c37088a) 0/10
# with 0 false alarms. Rules written against round21_dev and the seen sets
# (script_check/round22_rules.py: blocking copies of loader batches beside a model moved to
# the same device, jitted functions fed queued lists of per-step arrays, device barriers
# before a side stream, barriers in a callee a loop calls per item, pin_memory parameters
# defaulting to False in every caller, device tensors from Python lists per batch, backward
# per micro-batch split without no_sync in FSDP/DDP files, bare torch.compile fed
# batch-shaped reshapes) -> 9/10 with 0 (xlron_27 left: nothing in its code says the
# table is a JAX array); no seen set moved, no alarm added (all info, added late).
# Rules frozen at ee41356; round21_heldout (never checked before) measured once there: 11/29
# (38%) with 0 false alarms -- the untouched figure, and its floor below (the step-0 rules,
# c37088a, give it 9/29 with 0, measured after the freeze: this round's list-tensor form adds
# sglang_23332's two torch.tensor lines); no rule changed after it.
# Twenty-third round, step 0 (before corpus_round22 is read; round21_heldout dev material
# from now on): its misses written generally (script_check/gap23_rules.py: .tolist()/.item()/
# .cpu() reads, torch.cuda.synchronize() and empty_cache() in per-step code -- also methods
# named as a serving or RL driver calls them per step or request --, clip_grad_norm_ with
# error_if_nonfinite=True per step, range loops bounded by a static argument in a function
# nested in a jitted one) -> round21_heldout 11/29 + 0 -> 29/29 + 0; no other seen set moved,
# no alarm added (all info, added late).
# Twenty-third round (corpus_round22, split by random.Random(46) before any check; two
# collectors, 38 files): round22_dev at its first check (rules through step 0, 6d57c84) 8/33
# with 6 false alarms (older rules' warnings on real but unmarked syncs and timings). Rules
# written against round22_dev and the seen sets (script_check/round23_rules.py -- since
# moved to forms_data.py -- and round23b_rules.py: loaders built in one function and
# iterated per epoch by its caller,
# **kwargs loaders no caller gives workers or pinning, TrainingArguments without loader
# workers, Dataset helpers reached from __getitem__ looping over pandas rows, autograd turned
# on in eval steps, accelerator gathers in Trainer loss methods, .item() per tensor element,
# list .index() per item, per-parameter optimizer loops, no_backward_sync around the backward
# only, host tensors in helpers run per batch, per-datum autograd loops, zip comprehensions
# joined with torch.cat, lax.map of a fresh closure per call, jitted step loops under vmap)
# -> 29/33 with the same 6 (matgl_783:31 and pyg_8145's three library-internal syncs left);
# no seen set moved, no alarm added (all info, added late).
# Rules frozen at 13de2fc; round22_heldout (never checked before) measured once there: 5/31
# (16%) with 10 false alarms -- the untouched figure, and its floor below (the step-0 rules,
# 6d57c84, give it the same 5/31 with 10, measured after the freeze: this round's rules add
# no held-out mark); no rule changed after it.
# Twenty-fourth round, step 0 (before corpus_round23 is read; round22_heldout dev material
# from now on): its misses written generally (script_check/gap24_rules.py: collectives and
# .item() in Lightning callbacks' per-batch hooks, .cpu() before a reduction in Trainer
# metrics, gathers in a step's callee, .cpu().numpy() round trips back to the device, jnp.append
# in a loop, apply_updates outside jit, builtin max/min of a tensor sum, .cpu().numpy()
# comprehensions in a step's callee) -> round22_heldout 5/31 + 10 -> 21/31 + 10, its floor
# below raised to that seen figure as earlier step 0s did (the measured-once 5/31 with 10 is
# the label's and the README's); no other seen set moved, no alarm added.
# Twenty-fourth round (corpus_round23, split by random.Random(47) before any check; two
# collectors, 20 files): round23_dev at its first check (rules through step 0 and the later
# refinements ed5bac1/8feec53, 9909da1) 3/11 with 0 false alarms. Rules written against
# round23_dev and the seen sets (script_check/round24_rules.py: clock pairs around a call of
# a module handed in as a parameter, warm-up calls of a jitted function not waited for
# before the timed loop, context timers written as a class's __call__ used through an
# instance around JAX calls, .predict in a helper a loop calls per batch, module calls per
# row of a tensor, small constant-shape cuNumeric/cupy arrays) -> 11/11 with 0; no seen set
# moved, no alarm added (all info, added late).
# Rules frozen at 316602d; round23_heldout (never checked before) measured once there: 2/10
# (20%) with 6 false alarms (older rules' warnings) -- the untouched figure, and its floor
# below (the same rules without round24_forms give it the same 2/10 with 6, measured after
# the freeze); no rule changed after it.
# Twenty-fifth round, step 0 (before corpus_round24 is read; round23_heldout dev material
# from now on): its misses written generally (script_check/gap25_rules.py: clock pairs around
# a parameter called on a tensor moved to the device, class timers around cupy work, tick
# timers around a jitted step, a clock started before a cold generator's first item,
# elapsed_time of an unsynchronized CUDA event, mark_step in a timed loop, predict on a
# one-row input per iteration, worker counts capped by a small default) -> round23_heldout
# 2/10 + 6 -> 10/10 + 6, its floor below raised to that seen figure as earlier step 0s did
# (the measured-once 2/10 with 6 is the label's and the README's); no other seen set moved,
# no alarm added.
MEASURED = {"dev": (20, 1), "heldout": (26, 3), "fresh": (14, 0), "new_dev": (14, 1),
            "new_heldout": (14, 1), "round2_dev": (15, 0), "round2_heldout": (16, 1),
            "round3_dev": (14, 1), "round3_heldout": (20, 1), "round4_dev": (16, 3),
            "round4_heldout": (18, 1), "round5_dev": (22, 0), "round5_heldout": (21, 1),
            "round6_dev": (23, 1), "round6_heldout": (16, 1), "round7_dev": (19, 0),
            "round7_heldout": (15, 0), "round8_dev": (17, 0), "round8_heldout": (7, 0),
            "round9_dev": (13, 0), "round9_heldout": (7, 2),
            "round10_dev": (13, 1), "round10_heldout": (9, 0), "round11_dev": (10, 1),
            "round11_heldout": (9, 2), "round12_dev": (13, 0),
            "round12_heldout": (12, 0), "round13_dev": (13, 1), "round13_heldout": (12, 1),
            "round14_dev": (12, 1), "round14_heldout": (9, 0), "round15_dev": (13, 0),
            "round15_heldout": (17, 2),
            "round16_dev": (12, 1), "round16_heldout": (12, 3),
            "round17_dev": (24, 1), "round17_heldout": (25, 2),
            "round18_dev": (26, 2), "round18_heldout": (29, 0),
            "round19_dev": (18, 6), "round19_heldout": (26, 1),
            "round20_dev": (19, 0), "round20_heldout": (23, 1),
            "round21_dev": (9, 0), "round21_heldout": (29, 0),
            "round22_dev": (29, 6), "round22_heldout": (21, 10),
            "round23_dev": (11, 0), "round23_heldout": (10, 6)}


def _header(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text()[:900]
    return "".join(json.loads(path.read_text())["cells"][0]["source"])


def judge(path: Path) -> tuple[int, int, list[str], list[str]]:
    """(pitfalls, found, missed, false alarms) of one corpus script or notebook, judged by
    statement (``script_corpus_judge``: same rule for every set)."""
    marks = {pos: set(m.group(1).split("|")) for pos, line in marked_lines(path)
             if (m := _PITFALL.search(line))}
    key = statement_keys(path)
    report = inspect_script(path, mac_snapshot() if "snapshot: mac" in _header(path) else None)
    at: dict[object, set[str]] = {}
    alarms = []
    marked_keys = {key.get(pos, pos) for pos in marks}
    for f in report.findings:
        pos = f.location[len(str(path)) + 1:]
        at.setdefault(key.get(pos, pos), set()).add(f.id)
        if key.get(pos, pos) not in marked_keys and f.severity != "info":
            alarms.append(f"{path.name}:{pos} {f.severity} {f.id}")
    missed = [f"{path.name}:{pos} {'|'.join(sorted(ids))}" for pos, ids in marks.items()
              if not ids & at.get(key.get(pos, pos), set())]
    return len(marks), len(marks) - len(missed), missed, alarms


def _paths(half: str) -> list[Path]:
    if half == "fresh":
        return sorted(FRESH.glob("*.py"))
    if half.startswith("round23_"):
        return [ROUND23 / n for n, row in sorted(ROUND23_SPLIT.items()) if row["half"] == half]
    if half.startswith("round22_"):
        return [ROUND22 / n for n, row in sorted(ROUND22_SPLIT.items()) if row["half"] == half]
    if half.startswith("round21_"):
        return [ROUND21 / n for n, row in sorted(ROUND21_SPLIT.items()) if row["half"] == half]
    if half.startswith("round20_"):
        return [ROUND20 / n for n, row in sorted(ROUND20_SPLIT.items()) if row["half"] == half]
    if half.startswith("round19_"):
        return [ROUND19 / n for n, row in sorted(ROUND19_SPLIT.items()) if row["half"] == half]
    if half.startswith("round18_"):
        return [ROUND18 / n for n, row in sorted(ROUND18_SPLIT.items()) if row["half"] == half]
    if half.startswith("round17_"):
        return [ROUND17 / n for n, row in sorted(ROUND17_SPLIT.items()) if row["half"] == half]
    if half.startswith("round16_"):
        return [ROUND16 / n for n, row in sorted(ROUND16_SPLIT.items()) if row["half"] == half]
    if half.startswith("round15_"):
        return [ROUND15 / n for n, row in sorted(ROUND15_SPLIT.items()) if row["half"] == half]
    if half.startswith("round14_"):
        return [ROUND14 / n for n, row in sorted(ROUND14_SPLIT.items()) if row["half"] == half]
    if half.startswith("round13_"):
        return [ROUND13 / n for n, row in sorted(ROUND13_SPLIT.items()) if row["half"] == half]
    if half.startswith("round12_"):
        return [ROUND12 / n for n, row in sorted(ROUND12_SPLIT.items()) if row["half"] == half]
    if half.startswith("round11_"):
        return [ROUND11 / n for n, row in sorted(ROUND11_SPLIT.items()) if row["half"] == half]
    if half.startswith("round10_"):
        return [ROUND10 / n for n, row in sorted(ROUND10_SPLIT.items()) if row["half"] == half]
    if half.startswith("round9_"):
        return [ROUND9 / n for n, row in sorted(ROUND9_SPLIT.items()) if row["half"] == half]
    if half.startswith("round8_"):
        return [ROUND8 / n for n, row in sorted(ROUND8_SPLIT.items()) if row["half"] == half]
    if half.startswith("round7_"):
        return [ROUND7 / n for n, row in sorted(ROUND7_SPLIT.items()) if row["half"] == half]
    if half.startswith("round6_"):
        return [ROUND6 / n for n, row in sorted(ROUND6_SPLIT.items()) if row["half"] == half]
    if half.startswith("round5_"):
        return [ROUND5 / n for n, row in sorted(ROUND5_SPLIT.items()) if row["half"] == half]
    if half.startswith("round4_"):
        return [ROUND4 / n for n, row in sorted(ROUND4_SPLIT.items()) if row["half"] == half]
    if half.startswith("round3_"):
        return [ROUND3 / n for n, row in sorted(ROUND3_SPLIT.items()) if row["half"] == half]
    if half.startswith("round2_"):
        return [ROUND2 / n for n, row in sorted(ROUND2_SPLIT.items()) if row["half"] == half]
    if half.startswith("new_"):
        return [NEW / name for name, row in sorted(NEW_SPLIT.items()) if row["half"] == half]
    return [CORPUS / name for name, row in sorted(SPLIT.items()) if row["half"] == half]


def measure(half: str) -> tuple[int, int, list[str], list[str]]:
    total = found = 0
    missed: list[str] = []
    alarms: list[str] = []
    for path in _paths(half):
        n, k, m, a = judge(path)
        total, found, missed, alarms = total + n, found + k, missed + m, alarms + a
    return total, found, missed, alarms


# Each later round's halves: ``random.Random(SEED).sample(sorted(names), n // 2)`` is its dev
# half, the rest its held-out half (the seed is in each corpus README).
SEEDED_SPLITS = [(NEW, NEW_SPLIT, 24, "new"), (ROUND2, ROUND2_SPLIT, 25, "round2"),
                 (ROUND3, ROUND3_SPLIT, 26, "round3"), (ROUND4, ROUND4_SPLIT, 27, "round4"),
                 (ROUND5, ROUND5_SPLIT, 28, "round5"), (ROUND6, ROUND6_SPLIT, 29, "round6"),
                 (ROUND7, ROUND7_SPLIT, 30, "round7"), (ROUND8, ROUND8_SPLIT, 32, "round8"),
                 (ROUND9, ROUND9_SPLIT, 33, "round9"), (ROUND10, ROUND10_SPLIT, 34, "round10"),
                 (ROUND11, ROUND11_SPLIT, 35, "round11"), (ROUND12, ROUND12_SPLIT, 36, "round12"),
                 (ROUND13, ROUND13_SPLIT, 37, "round13"),
                 (ROUND14, ROUND14_SPLIT, 38, "round14"),
                 (ROUND15, ROUND15_SPLIT, 39, "round15"),
                 (ROUND16, ROUND16_SPLIT, 40, "round16"),
                 (ROUND17, ROUND17_SPLIT, 41, "round17"),
                 (ROUND18, ROUND18_SPLIT, 42, "round18"),
                 (ROUND19, ROUND19_SPLIT, 43, "round19"),
                 (ROUND20, ROUND20_SPLIT, 44, "round20"),
                 (ROUND21, ROUND21_SPLIT, 45, "round21"),
                 (ROUND22, ROUND22_SPLIT, 46, "round22"),
                 (ROUND23, ROUND23_SPLIT, 47, "round23")]


@pytest.mark.parametrize(("folder", "split", "seed", "prefix"), SEEDED_SPLITS,
                         ids=[x[3] for x in SEEDED_SPLITS])
def test_seeded_split_is_by_fixed_seed(folder: Path, split: dict, seed: int,
                                       prefix: str) -> None:
    """A round's halves are its seeded sample (``{prefix}_dev``) and the rest
    (``{prefix}_heldout``); every file is in the split and names its source URL."""
    import random

    names = sorted(p.name for p in folder.iterdir() if p.suffix in (".py", ".ipynb"))
    assert names == sorted(split) and len(names) >= (
        40 if prefix == "round17" else 36 if prefix == "round18" else 27 if prefix == "round19"
        else 38 if prefix == "round22" else 20 if prefix == "round23"
        else 31 if prefix == "round20" else 19 if prefix in ("round16", "round21")
        else 20 if prefix in ("round11", "round12", "round13", "round14", "round15") else 24)
    dev = set(random.Random(seed).sample(names, len(names) // 2))
    for name, row in split.items():
        assert row["half"] == (f"{prefix}_dev" if name in dev else f"{prefix}_heldout")
        assert f"Source: {row['url']}" in _header(folder / name)


def test_split_is_by_url_hash() -> None:
    """Every corpus file is in the split, and its half follows from its source URL."""
    import hashlib

    files = sorted(p.name for p in CORPUS.glob("*.py"))
    assert files == sorted(SPLIT)
    for name, row in SPLIT.items():
        head = (CORPUS / name).read_text()[:600]
        assert f"# Source: {row['url']}" in head
        digest = hashlib.sha256(row["url"].encode()).hexdigest()
        assert row["half"] == ("dev" if int(digest[:2], 16) % 2 == 0 else "heldout")


@pytest.mark.parametrize("half", ["dev", "heldout", "fresh", "new_dev", "new_heldout",
                                  "round2_dev", "round2_heldout", "round3_dev",
                                  "round3_heldout", "round4_dev", "round4_heldout",
                                  "round5_dev", "round5_heldout", "round6_dev",
                                  "round6_heldout", "round7_dev", "round7_heldout",
                                  "round8_dev", "round8_heldout", "round9_dev",
                                  "round9_heldout", "round10_dev", "round10_heldout",
                                  "round11_dev", "round11_heldout", "round12_dev",
                                  "round12_heldout", "round13_dev", "round13_heldout",
                                  "round14_dev", "round14_heldout", "round15_dev",
                                  "round15_heldout", "round16_dev", "round16_heldout",
                                  "round17_dev", "round17_heldout", "round18_dev",
                                  "round18_heldout", "round19_dev", "round19_heldout",
                                  "round20_dev", "round20_heldout", "round21_dev",
                                  "round21_heldout", "round22_dev", "round22_heldout",
                                  "round23_dev", "round23_heldout"])
def test_corpus_half(half: str) -> None:
    """Recall at the right line and false alarms on one half; printed with -s."""
    total, found, missed, alarms = measure(half)
    scripts = len(_paths(half))
    label = {"heldout": "heldout (seen since; untouched it was 11/27)",
             "fresh": "fresh (seen since; untouched it was 4/17 with 1 false alarm)",
             "new_dev": "new_dev (rules written against it; 2/14 with 3 before)",
             "new_heldout": "new_heldout (seen since; untouched it was 7/16 with 4 false "
                            "alarms)",
             "round2_dev": "round2_dev (rules written against it; 3/15 before)",
             "round2_heldout": "round2_heldout (seen since; untouched it was 8/16 with 2 false "
                               "alarms)",
             "round3_dev": "round3_dev (rules written against it; 7/14 with 1 before)",
             "round3_heldout": "round3_heldout (seen since; untouched it was 11/20 with 2 "
                               "false alarms)",
             "round4_dev": "round4_dev (rules written against it; 2/16 with 4 before)",
             "round4_heldout": "round4_heldout (seen since; untouched it was 8/18 with 4 "
                               "false alarms)",
             "round5_dev": "round5_dev (rules written against it; 8/23 before)",
             "round5_heldout": "round5_heldout (seen since; untouched it was 7/22 with 5 "
                               "false alarms)",
             "round6_dev": "round6_dev (rules written against it; 7/23 with 6 before)",
             "round6_heldout": "round6_heldout (seen since; untouched it was 2/18 with 1 "
                               "false alarm)",
             "round7_dev": "round7_dev (rules written against it; 6/18 with 3 before)",
             "round7_heldout": "round7_heldout (seen since; untouched it was 6/20 with 0 "
                               "false alarms)",
             "round8_dev": "round8_dev (rules written against it; 3/20 before)",
             "round8_heldout": "round8_heldout (seen since; untouched it was 2/19 with 0 "
                               "false alarms)",
             "round9_dev": "round9_dev (rules written against it; 2/13 before)",
             "round9_heldout": "round9_heldout (seen since; untouched it was 1/15 with 3 "
                               "false alarms)",
             "round10_dev": "round10_dev (rules written against it; 6/13 with 1 before)",
             "round10_heldout": "round10_heldout (seen since; untouched it was 4/13 with 0 "
                                "false alarms)",
             "round11_dev": "round11_dev (rules written against it; 4/11 with 2 before)",
             "round11_heldout": "round11_heldout (seen since; untouched it was 1/12 with 2 "
                                "false alarms)",
             "round12_dev": "round12_dev (rules written against it; 2/11 with 2 before)",
             "round12_heldout": "round12_heldout (seen since; untouched it was 3/11 with 2 "
                                "false alarms)",
             "round13_dev": "round13_dev (rules written against it; 2/13 with 3 before)",
             "round13_heldout": "round13_heldout (seen since; untouched it was 5/12 with 1 "
                                "false alarm)",
             "round14_dev": "round14_dev (rules written against it; 7/12 with 1 before)",
             "round14_heldout": "round14_heldout (seen since; untouched it was 6/13 with 0 "
                                "false alarms)",
             "round15_dev": "round15_dev (rules written against it; 7/13 with 0 before)",
             "round15_heldout": "round15_heldout (seen since; untouched it was 10/17 with 3 "
                                "false alarms)",
             "round16_dev": "round16_dev (rules written against it; 10/12 with 1 before)",
             "round16_heldout": "round16_heldout (seen since; untouched it was 4/12 with 3 "
                                "false alarms)",
             "round17_dev": "round17_dev (rules written against it; 5/27 with 2 before)",
             "round17_heldout": "round17_heldout (untouched until the freeze; measured once: "
                                "6/25 with 2 false alarms)",
             "round18_dev": "round18_dev (rules written against it; 7/27 with 2 before)",
             "round18_heldout": "round18_heldout (untouched until the freeze; measured once: "
                                "8/29 with 0 false alarms)",
             "round19_dev": "round19_dev (rules written against it; 3/18 with 6 before)",
             "round19_heldout": "round19_heldout (untouched until the freeze; measured once: "
                                "7/26 with 1 false alarm)",
             "round20_dev": "round20_dev (rules written against it; 8/19 with 0 before)",
             "round21_dev": "round21_dev (rules written against it; 0/10 with 0 before)",
             "round22_dev": "round22_dev (rules written against it; 8/33 with 6 before)",
             "round23_dev": "round23_dev (rules written against it; 3/11 with 0 before)",
             "round23_heldout": "round23_heldout (untouched until the freeze; measured once: "
                                "2/10 with 6 false alarms)",
             "round22_heldout": "round22_heldout (untouched until the freeze; measured once: "
                                "5/31 with 10 false alarms)",
             "round21_heldout": "round21_heldout (untouched until the freeze; measured once: "
                                "11/29 with 0 false alarms)",
             "round20_heldout": "round20_heldout (untouched until the freeze; measured once: "
                                "6/25 with 1 false alarm)"}.get(
                 half, half)
    print(f"\ncorpus {label}: {scripts} scripts; expert-named pitfalls found at the right line "
          f"{found}/{total} ({100 * found / total:.0f}%); false alarms (warning/error) "
          f"{len(alarms)}")
    for m in missed:
        print(f"  missed {m}")
    for a in alarms:
        print(f"  false alarm {a}")
    best_found, fewest_alarms = MEASURED[half]
    assert found >= best_found and len(alarms) <= fewest_alarms

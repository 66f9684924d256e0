"""Machine profiles (recorded tables of candidates) and their replay to the advisor."""

from devicebench.profiles.profile import MachineProfile, TrialRecord, load_profile

__all__ = ["MachineProfile", "TrialRecord", "load_profile"]

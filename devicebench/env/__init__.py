"""Environment: probe (facts) -> EnvSnapshot (data) -> checks (findings)."""

"""The configuration: GuardConfig and the functions' typed settings."""

"""Operator tooling and the local AWS emulation: never part of a Lambda asset."""

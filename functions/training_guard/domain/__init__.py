"""Pure: events, decisions, mutes, pricing arithmetic, totals, the outcome of a reaction (no I/O)."""

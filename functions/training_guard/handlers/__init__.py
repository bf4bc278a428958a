"""Lambda entry points: parse, one domain call, adapters."""

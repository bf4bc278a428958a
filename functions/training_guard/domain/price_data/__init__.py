"""Tables shipped with the code, each entry cited: fallback training list prices and GPUs per instance type."""

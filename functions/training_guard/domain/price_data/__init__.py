"""Tables shipped with the code (issue 15): a fallback list price per SageMaker training instance type and
region, each entry with its source and date, and the GPU count per training instance type.

Both are plain Python (no file read at import, nothing but the standard library) and are read only through
`training_guard.domain.pricing`. An entry is here only when a source can be named for it; a type that is missing is
unknown, and unknown is shown as unknown, never guessed.
"""

"""The comparison kinds of a record field (`pdbq.coref.levels`), in a module of their own so the
``pdbq dedupe`` command can list them in its help without importing the engine."""

KINDS = ("string", "text", "category", "code", "date", "number", "list", "codes")

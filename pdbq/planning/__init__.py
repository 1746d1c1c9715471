"""Planning: a probabilistic query → its plan (x_q, evidence, latent set, pruned graph) → an
answer table; EXPLAIN; the batch inference behind `infer` and the UDFs. Below the interfaces
(api, shell, udf): it never imports them (docs/architecture.md)."""

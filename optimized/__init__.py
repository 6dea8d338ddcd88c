"""``veridec.optimized``, the middle floor's fast side: the same decoders over the model's K/V cache API (prefix
and dual caches, sparse windows, packed tree verification, batching), run through the same conformance tests
as the reference. Rules come from ``veridec.rules``, so only how logits are obtained differs.

It imports only the shared floor (``veridec``); ``veridec.reference`` never imports it, nor it that.
"""

"""The checks behind ``veridec verify``: the registry (``registry``: ``@check``, ``VerifyContext``,
``VerifyResult``) and one module per family (``models``, ``reference``, ``bounds``), each check a statement of
the spec held on the model under test with its worst margin.

Imports the shared floor, the reference decoders and the proofs; imported by the CLI and the exactness table.
"""

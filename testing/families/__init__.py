"""The checker's decoder families, one record each (``Family``, in the spirit of ``testing.tiers.TIERS``): how a
family's cases are drawn and resolved and which knobs it searches; each family's file also holds its targets'
settings and the official loops they are exact to (``testing.official.Official``). The checker asks the record;
it never compares a family's name. A new family is one file here plus its rows in ``testing.targets.TARGETS``
(``testing.targets.FAMILIES`` lists the families of its rows)."""

from .common import Family

__all__ = ["Family"]

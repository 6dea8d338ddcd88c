"""The worked examples' data files (``tests/oracles/examples/<module>.json``): loading and writing.

JSON holds str, int, finite float, bool, None, lists and objects with str keys. Every other value the examples
hold is written as an object with exactly one key, a tag:

    {"float": "-inf"}          float("-inf"); also "inf" and "nan"
    {"fraction": "7/18"}       fractions.Fraction(7, 18) ("3" for Fraction(3))
    {"tuple": [0, 1]}          a tuple (decoded items)
    {"dict": [[k, v], ...]}    a dict whose keys are not all str (int or tuple keys), in order; a str-keyed dict
                               whose only key is a tag name is written so too
    {"name": "toy_model"}      an object of the loading oracle module (``names``), e.g. a toy model function

A key starting with "#" is a comment (the prose of an example, how its values were computed) and is dropped when
loading, so ``load`` returns exactly the objects the examples hold. Floats are written with ``repr`` (shortest
round trip, so they load bit for bit, -0.0 included).
"""

import json
import math
from fractions import Fraction
from pathlib import Path

TAGS = ("float", "fraction", "tuple", "dict", "name")
WIDTH = 120  # longest line ``dumps`` writes, indentation included (where a single value allows)


def decode(node, names=None):
    """A JSON value (as ``json.loads`` returns it) -> the Python value it encodes; ``names``: {name: object}."""
    if isinstance(node, list):
        return [decode(x, names) for x in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and next(iter(node)) in TAGS:
        ((tag, value),) = node.items()
        return _decode_tag(tag, value, names)
    return {k: decode(v, names) for k, v in node.items() if not k.startswith("#")}


def _decode_tag(tag, value, names):
    if tag == "float":
        return float(value)
    if tag == "fraction":
        return Fraction(value)
    if tag == "tuple":
        return tuple(decode(x, names) for x in value)
    if tag == "dict":
        return {decode(k, names): decode(v, names) for k, v in value}
    return names[value]


def encode(value, names=None):
    """The inverse of ``decode``: a Python value -> a JSON value; ``names``: {id(object): name}."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, Fraction):
        return {"fraction": str(value)}
    if isinstance(value, tuple):
        return {"tuple": [encode(x, names) for x in value]}
    if isinstance(value, list):
        return [encode(x, names) for x in value]
    if isinstance(value, dict):
        return _encode_dict(value, names)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if names and id(value) in names:
        return {"name": names[id(value)]}
    raise TypeError(f"no encoding for {type(value).__name__}: {value!r}")


def _encode_dict(value, names):
    keys = list(value)
    if any(str(k).startswith("#") for k in keys):
        raise ValueError(f"a key starting with '#' would be read as a comment: {keys}")
    plain = all(isinstance(k, str) for k in keys) and not (len(keys) == 1 and keys[0] in TAGS)
    if plain:
        return {k: encode(v, names) for k, v in value.items()}
    return {"dict": [[encode(k, names), encode(v, names)] for k, v in value.items()]}


def dumps(node, indent=0, split=1, lead=0):
    """JSON text of an encoded value: on one line where it fits in ``WIDTH`` (``lead``: the characters before it
    on its first line, indentation included), else one item per line; down to depth ``split`` always split (one
    example per block)."""
    flat = json.dumps(node, ensure_ascii=False, allow_nan=False)
    if not isinstance(node, (list, dict)) or not node or (split <= 0 and max(lead, indent) + len(flat) < WIDTH):
        return flat
    pad = " " * (indent + 2)
    if isinstance(node, list):
        items = [pad + dumps(x, indent + 2, split - 1, indent + 2) for x in node]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = []
    for k, v in node.items():
        head = f"{pad}{json.dumps(k, ensure_ascii=False)}: "
        items.append(head + dumps(v, indent + 2, split - 1, len(head)))
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def path_for(module_file, stem=None) -> Path:
    """``examples/<stem>.json`` next to the oracle module ``module_file`` (stem: the module's name)."""
    module = Path(module_file)
    return module.parent / "examples" / f"{stem or module.stem}.json"


def load(module_file, names=None, stem=None):
    """The decoded ``examples`` list of the oracle module's data file (fresh objects on every call)."""
    with open(path_for(module_file, stem), encoding="utf-8") as f:
        return decode(json.load(f), names)["examples"]

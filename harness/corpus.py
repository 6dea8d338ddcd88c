"""The default model's world: generated lines of small tasks, each with a checker that scores it valid/invalid.

Every line starts with a keyword and mixes free choices (which task, its arguments, where a count stops)
with stretches fixed by what came before (a copy after '>', the next number of a count, a verb's agreement),
so confident parallel decoding has something to find and decoders can still differ. A document is several
lines joined by newlines; the model is trained on documents followed by EOS padding.

Tasks (line grammar; validity):
- ``count 17 18 19``  consecutive integers (3-8 of them, start 0-989);
- ``copy abc>abc``  a 3-8 letter word, then the same word;
- ``rev abc>cba``  the word reversed;
- ``sort dbca>abcd``  the letters sorted;
- ``from d to h:defgh``  the alphabet run between two letters;
- ``add 23+45=68``  a sum of two numbers below 50;
- ``the big cat sleeps.``  determiner, optional adjective, noun and verb agreeing in number.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from typing import Callable

LETTERS = string.ascii_lowercase
ALPHABET = LETTERS + string.digits + " +=>:.\n"  # the default model's characters (tokenizer ids 0..44)

SINGULAR_NOUNS = {"cat": "cats", "dog": "dogs", "bird": "birds", "fox": "foxes", "child": "children", "mouse": "mice"}
PLURAL_NOUNS = {plural: singular for singular, plural in SINGULAR_NOUNS.items()}
VERBS = {"run": "runs", "sleep": "sleeps", "jump": "jumps", "eat": "eats", "watch": "watches"}  # plural: singular
SINGULAR_VERBS = set(VERBS.values())
ADJECTIVES = ("big", "small", "red", "old", "happy")
DETERMINERS = {"the": "any", "a": "singular", "every": "singular", "some": "plural", "two": "plural"}


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 8)))


def _gen_count(rng):
    start = rng.randint(0, 989)
    return "count " + " ".join(str(start + k) for k in range(rng.randint(3, 8)))


def _check_count(line):
    m = re.fullmatch(r"count((?: \d+){3,8})", line)
    if not m:
        return False
    numbers = [int(n) for n in m.group(1).split()]
    return all(not (len(s) > 1 and s[0] == "0") for s in m.group(1).split()) and all(
        b == a + 1 for a, b in zip(numbers, numbers[1:]))


def _transform_task(keyword: str, transform: Callable[[str], str]):
    def generate(rng):
        word = _word(rng)
        return f"{keyword} {word}>{transform(word)}"

    def check(line):
        m = re.fullmatch(keyword + r" ([a-z]{3,8})>([a-z]*)", line)
        return bool(m) and m.group(2) == transform(m.group(1))

    return generate, check


def _gen_run(rng):
    a = rng.randint(0, 22)
    b = rng.randint(a + 2, min(a + 9, 25))
    return f"from {LETTERS[a]} to {LETTERS[b]}:{LETTERS[a:b + 1]}"


def _check_run(line):
    m = re.fullmatch(r"from ([a-z]) to ([a-z]):([a-z]*)", line)
    if not m:
        return False
    a, b = LETTERS.index(m.group(1)), LETTERS.index(m.group(2))
    return b - a >= 2 and m.group(3) == LETTERS[a:b + 1]


def _gen_add(rng):
    a, b = rng.randint(0, 49), rng.randint(0, 49)
    return f"add {a}+{b}={a + b}"


def _check_add(line):
    m = re.fullmatch(r"add (\d{1,2})\+(\d{1,2})=(\d{1,3})", line)
    canonical = bool(m) and all(str(int(g)) == g for g in m.groups())
    return canonical and int(m.group(1)) + int(m.group(2)) == int(m.group(3))


def _gen_sentence(rng):
    det = rng.choice(sorted(DETERMINERS))
    plural = DETERMINERS[det] == "plural" or (DETERMINERS[det] == "any" and rng.random() < 0.5)
    noun = rng.choice(sorted(PLURAL_NOUNS if plural else SINGULAR_NOUNS))
    verb = rng.choice(sorted(VERBS))
    words = [det] + ([rng.choice(ADJECTIVES)] if rng.random() < 0.5 else []) + [noun, verb if plural else VERBS[verb]]
    return " ".join(words) + "."


def _check_sentence(line):
    m = re.fullmatch(r"([a-z]+)(?: ([a-z]+))? ([a-z]+) ([a-z]+)\.", line)
    if not m or m.group(1) not in DETERMINERS or (m.group(2) and m.group(2) not in ADJECTIVES):
        return False
    det, noun, verb = m.group(1), m.group(3), m.group(4)
    if noun in SINGULAR_NOUNS:
        number = "singular"
    elif noun in PLURAL_NOUNS:
        number = "plural"
    else:
        return False
    verb_ok = verb in SINGULAR_VERBS if number == "singular" else verb in VERBS
    return verb_ok and DETERMINERS[det] in ("any", number)


@dataclass(frozen=True)
class Task:
    name: str
    generate: Callable[[random.Random], str]
    check: Callable[[str], bool]


TASKS = (
    Task("count", _gen_count, _check_count),
    Task("copy", *_transform_task("copy", lambda w: w)),
    Task("rev", *_transform_task("rev", lambda w: w[::-1])),
    Task("sort", *_transform_task("sort", lambda w: "".join(sorted(w)))),
    Task("from", _gen_run, _check_run),
    Task("add", _gen_add, _check_add),
    Task("sentence", _gen_sentence, _check_sentence),
)
TASK_BY_KEYWORD = {t.name: t for t in TASKS if t.name != "sentence"}


def task_of(line: str) -> Task:
    return TASK_BY_KEYWORD.get(line.split(" ", 1)[0], TASKS[-1])


def check_line(line: str) -> bool:
    """Is this one line (no newline) a valid line of some task?"""
    return task_of(line).check(line)


def generate_line(rng: random.Random) -> str:
    return rng.choice(TASKS).generate(rng)


def generate_document(rng: random.Random, max_chars: int, max_lines: int = 10) -> str:
    """Complete lines joined by newlines, at most ``max_chars`` characters in all (at least one line)."""
    lines = [generate_line(rng)]
    for _ in range(rng.randint(1, max_lines) - 1):
        line = generate_line(rng)
        if sum(len(x) + 1 for x in lines) + len(line) > max_chars:
            break
        lines.append(line)
    return "\n".join(lines)


@dataclass
class Score:
    valid: int
    lines: int

    @property
    def rate(self) -> float:
        return self.valid / self.lines if self.lines else 0.0


def score_text(text: str) -> Score:
    """Validity of every line of ``text`` (text ends at its first EOS; the caller strips special tokens)."""
    lines = [line for line in text.split("\n") if line]
    return Score(sum(check_line(line) for line in lines), len(lines))


def split_prompt(document: str, rng: random.Random) -> tuple[str, str]:
    """Cut a held-out document inside one of its lines, after the line's free choices are visible.

    Returns (prompt, the true rest of that line). The cut is after the keyword and first argument, so the
    rest is (mostly) determined: continuing it correctly is what the validity metric scores.
    """
    lines = document.split("\n")
    k = rng.randrange(len(lines))
    line = lines[k]
    cut = _cut_point(line)
    prompt = "\n".join(lines[:k] + [line[:cut]])
    return prompt, line[cut:]


def _cut_point(line: str) -> int:
    for marker in (">", ":", "="):
        if marker in line:
            return line.index(marker) + 1
    if line.startswith("count "):
        return len(" ".join(line.split(" ")[:3])) + 1  # keyword and two numbers
    return len(line.split(" ")[0]) + 1  # sentences: the determiner

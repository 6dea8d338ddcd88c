"""The default model's corpus: every generated line passes its checker; corrupted lines fail."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridec.harness import corpus


@given(seed=st.integers(0, 10**6))
def test_generated_documents_are_valid_and_fit(seed):
    rng = random.Random(seed)
    doc = corpus.generate_document(rng, max_chars=120)
    assert len(doc) <= 120 or "\n" not in doc
    assert set(doc) <= set(corpus.ALPHABET)
    score = corpus.score_text(doc)
    assert score.valid == score.lines == len(doc.split("\n"))


@pytest.mark.parametrize("line", [
    "count 17 18 20", "count 7", "count 01 02 03", "copy abc>abd", "rev abc>abc", "sort cab>cab",
    "from c to f:cdefg", "from c to d:cd", "add 12+30=41", "add 1+1=02", "a cats run.", "two dog runs.",
    "the cat run.", "the mice sleeps.", "some child eats.", "the green cat runs.", "hello world", "",
])
def test_corrupted_lines_fail(line):
    assert not corpus.check_line(line)


@pytest.mark.parametrize("line", [
    "count 998 999 1000 1001", "copy zzz>zzz", "rev abcdefgh>hgfedcba", "sort hello>ehllo", "from a to c:abc",
    "add 49+49=98", "add 0+0=0", "the mice sleep.", "every old fox watches.", "two happy children eat.",
])
def test_valid_lines_pass(line):
    assert corpus.check_line(line)


@given(seed=st.integers(0, 10**6))
def test_split_prompt_cuts_inside_a_line(seed):
    rng = random.Random(seed)
    doc = corpus.generate_document(rng, max_chars=150)
    prompt, rest = corpus.split_prompt(doc, rng)
    line = prompt.split("\n")[-1] + rest
    assert line in doc.split("\n") and doc.startswith(prompt)
    assert corpus.check_line(line)


def test_score_counts_lines():
    score = corpus.score_text("count 1 2 3\ncopy ab>ab\nrev abc>abc")
    assert (score.valid, score.lines, round(score.rate, 3)) == (1, 3, 0.333)

"""Tests of accelopt_core.memory.vectors: tokens, hashed TF-IDF vectors, idf."""

from __future__ import annotations

import math

import numpy as np

from accelopt_core.memory import FEATURE_DIM
from accelopt_core.memory.vectors import (
    code_query,
    code_tokens,
    smoothed_idf,
    text_query,
    text_tokens,
    vectorize,
)


def test_code_tokens_split_dotted_snake_and_camel_names():
    tokens = list(code_tokens("acc += tl.dot(a_tile, bTile)\nfor i in range(n): pass"))
    assert tokens[:2] == ["acc", "tl.dot"]
    assert "dot" in tokens  # the last part of a dotted name
    assert {"a_tile", "tile", "btile"} <= set(tokens)  # snake_case / camelCase parts
    assert not {"a", "b", "i", "n", "for", "in", "pass"} & set(tokens)  # stop words, 1 letter


def test_text_tokens_add_bigrams_and_name_parts():
    tokens = list(text_tokens("Use tl.dot with larger tiles"))
    assert tokens[:3] == ["tl.dot", "larger", "tiles"]  # "use", "with" are stop words
    assert "tl.dot larger" in tokens and "larger tiles" in tokens
    assert "dot" in tokens and "tl" in tokens


def test_vectorize_weights_log_term_frequency():
    idx, val = vectorize([(["x", "x", "x", "y"], 2.0)])
    assert idx.dtype == np.int32 and val.dtype == np.float32
    assert list(idx) == sorted(idx) and len(idx) == 2 and (0 <= idx).all()
    assert (idx < FEATURE_DIM).all()
    assert sorted(val.tolist()) == [2.0, np.float32(2.0 * (1.0 + math.log(3)))]
    assert len(vectorize([([], 1.0)])[0]) == 0


def test_queries_of_the_same_code_agree():
    source = "y = tl.exp(x - tl.max(x, axis=0))"
    c_idx, _ = code_query(source)
    t_idx, _ = text_query(source)
    assert set(c_idx) <= set(t_idx)  # a text query includes the code tokens


def test_smoothed_idf():
    idx = np.array([1, 2, 1], dtype=np.int32)  # two documents: {1, 2} and {1}
    idf = smoothed_idf(idx, 2)
    assert idf.shape == (FEATURE_DIM,) and idf.dtype == np.float32
    assert idf[1] == np.float32(math.log(3 / 3) + 1)
    assert idf[2] == np.float32(math.log(3 / 2) + 1)
    assert idf[0] == np.float32(math.log(3 / 1) + 1)  # unseen: the largest weight

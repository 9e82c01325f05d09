"""memkit.scan.spellings: the batch fold is the fold of each text alone."""

from __future__ import annotations

from memkit.scan.spellings import fold, fold_each


def test_folding_many_at_once_folds_each_as_alone():
    """Every code point but NUL and the surrogates, and strings whose parts compose or
    reorder within themselves (a base and its marks, Hangul jamo, a ligature)."""
    chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    assert fold_each(chars) == [fold(c) for c in chars]
    texts = ["e\u0301", "\u0301", "\u1100\u1161", "\u1161", "\ufb01le", "A\u0323\u0307", "\u0344", "", "Stra\u00dfe"]
    assert fold_each(texts) == [fold(t) for t in texts]
    assert fold_each([]) == []

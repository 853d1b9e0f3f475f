"""Code similarity between students' answers: evidence for a person to read, never a verdict.

Each student's answer to each exercise (the answer cell, as graded) is fingerprinted with
`copydetect <https://github.com/blingenf/copydetect>`_ (MIT, on PyPI): Schleimer, Wilkerson and
Aiken's winnowing, the algorithm behind MOSS. Its input here is the answer's Python tokens (the
standard ``tokenize``), one character each, after ``ast.unparse`` has made spacing, parentheses
and quotes canonical and each run of independent statements has been put in one order: every
variable and argument is ``V``, every string ``S``; keywords, operators, numbers and attribute
names stay; comments and layout go. So a copy with renamed variables, other comments, other
spacing, reformatted through ``ast.unparse`` or with independent statements swapped fingerprints
as the original, and every size is a count of Python tokens.

* **Boilerplate**: every k-gram of the released notebook's code (signatures, docstrings, the given
  helpers, the stubs) is removed from every answer (copydetect's ``boilerplate``): what the course
  gave is never evidence.
* **Common passages weigh by their share of the class**: a passage (k-gram) held by more than
  :data:`COMMON_SHARE` of the students who answered the exercise is the natural way to write it and
  weighs nothing; a rarer one weighs the log of how much rarer (:func:`rarity`), so that two students
  who both wrote the idiomatic line share little evidence and a passage only they wrote is strong
  evidence. A fixed count (MOSS's ``-m 10``) is outgrown by a class: at 60 students a natural
  answer is shared by about 7. Dolos's ``--max-fingerprint-percentage`` is the same idea as a cut.
* **Scores**: copydetect's similarity of an answer to another is the share of its tokens (those
  its fingerprints cover) that fingerprints shared with the other cover; here each token weighs as
  the rarest passage over it. A pair's score on an exercise is both answers' matching weight over
  their weight; over the assignment, the mean of the exercises' scores, each exercise counting as
  the log of 1 + its weight, so that one long exercise written the same rare way by two honest
  students cannot carry the assignment. A pair is listed at :data:`THRESHOLD`
  or above when at least :data:`MIN_TOKENS` tokens (Python tokens, of passages that weigh) of each
  student's code match: one natural line in common lists no one, nor does a single exercise.
* **The model answer**: each student is also compared, the same way, with the reference (the
  source notebook's solution) with names kept (a leaked solution comes with its names):
  a student is reported only when their answers are near-verbatim copies of the model answer in
  passages the class did not converge on, at the same threshold and size.

copydetect compares two files at a time in Python (about 1 ms a pair here: 45,000 pairs and 18
exercises for 300 students would take 15 minutes), so every pair's score is computed here at once
from copydetect's fingerprints (the same union of covered tokens as its ``compare_files``, as a
matrix per exercise), and ``compare_files`` itself gives the matching passages of the pairs shown,
mapped back to whole tokens of the student's own text. Every k-gram is kept (copydetect's default
window of 1: its guarantee threshold equals its noise threshold), so the scores do not depend on
Python's per-process string hashing, which winnowing's choice of fingerprints would.
"""
from __future__ import annotations

import ast
import copy
import difflib
import functools
import io
import keyword
import tokenize
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage

from autograder.analytics import MIN_TOKENS, THRESHOLD

K = 7                  # Python tokens in a fingerprint: copydetect's noise threshold
COMMON_SHARE = 0.5     # a passage more than this share of the class shares is the natural way to write it
SMALL_CLASS = 20       # a smaller class is weighed as if it had this many students (a pair is never "the class")
MODEL = "model answer"
CANONICAL_AT_MOST = 3000   # tokens: a longer answer (no exercise needs one) is fingerprinted as written
ORDERED_AT_MOST = 40       # statements in one body put in canonical order (no exercise has more)
_SIGNIFICANT = (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING)
_SYMBOLS: dict[str, str] = {}   # a token's normalised text -> one character (one process, one table)


@dataclass(frozen=True)
class Comparison:
    """Two answers to one exercise (or an answer and the model answer)."""
    exercise: str
    left: str
    right: str
    similarity: float          # 0..1, both answers' matching weight over their weight (a token weighs as
    #                            the rarest passage over it)
    tokens: tuple[int, int]    # each answer's tokens in passages that weigh (the course's code removed)
    matched: tuple[int, int]   # each answer's tokens covered by fingerprints of the other


@dataclass
class Pair:
    """Two students over the assignment: every exercise both answered."""
    left: str
    right: str
    similarity: float          # the exercises' similarities, each counting as log(1 + its weight)
    tokens: int                # both students' tokens in passages that weigh
    matched: tuple[int, int]   # each one's tokens that the other's answers match
    comparisons: list[Comparison] = field(default_factory=list)   # the exercises with something in common


def _symbol(text: str) -> str:
    """One character per token text: Unicode's private use areas (a class with more distinct names
    than the first holds shares the second's characters by a hash: a rare collision, no error)."""
    if text in _SYMBOLS or len(_SYMBOLS) < 0x1900:
        return _SYMBOLS.setdefault(text, chr(0xE000 + len(_SYMBOLS)))
    return chr(0xF0000 + zlib.crc32(text.encode()) % 0xFFFE)


def _python_tokens(code: str, verbatim: bool = False) -> list[tuple[str, int, int]]:
    """(normalised text, start, end) of each significant token of ``code`` (offsets into ``code``);
    [] if it does not tokenize."""
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out: list[tuple[str, int, int]] = []
    previous = ""
    try:
        for t in tokenize.generate_tokens(io.StringIO(code).readline):
            if t.type not in _SIGNIFICANT:
                continue
            text = t.string
            if t.type == tokenize.STRING or (t.type == tokenize.NAME and not verbatim
                                             and not keyword.iskeyword(text) and previous != "."):
                text = "S" if t.type == tokenize.STRING else "V"
            out.append((text, starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1]))
            previous = t.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    return out


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _shape(node: ast.AST) -> str:
    """A statement with its names set aside: the order in which independent statements are put."""
    return " ".join(n.attr if isinstance(n, ast.Attribute) else repr(n.value) if isinstance(n, ast.Constant)
                    else type(n).__name__ for n in ast.walk(node))


def _ordered(tree: ast.AST) -> ast.AST:
    """``tree`` with each run of adjacent independent simple statements (neither reads nor writes
    what the other writes) in one canonical order, so that reordering them changes nothing. A body
    longer than :data:`ORDERED_AT_MOST` statements is left as written (the sort is quadratic)."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if not isinstance(body, list) or len(body) > ORDERED_AT_MOST:
                continue
            keys = [_shape(x) if isinstance(x, _SIMPLE) else "" for x in body]
            names = [(_names(x, ast.Store), _names(x, ast.Load)) for x in body]
            for _ in range(len(body)):
                swapped = False
                for i in range(len(body) - 1):
                    a, b = body[i], body[i + 1]
                    if not (isinstance(a, _SIMPLE) and isinstance(b, _SIMPLE)) or \
                            (isinstance(a, ast.Expr) and isinstance(a.value, ast.Constant)):
                        continue   # a docstring stays first
                    (wa, ra), (wb, rb) = names[i], names[i + 1]
                    if not (wa & (rb | wb) or wb & ra) and keys[i + 1] < keys[i]:
                        body[i], body[i + 1], swapped = b, a, True
                        keys[i], keys[i + 1] = keys[i + 1], keys[i]
                        names[i], names[i + 1] = names[i + 1], names[i]
                if not swapped:
                    break
    return tree


class Tokens:
    """An answer as copydetect reads it: its canonical form's tokens, one character each, and for
    each of them the span of the student's own text it stands for (None where the canonical form
    added it)."""

    def __init__(self, code: str, verbatim: bool = False):
        """``verbatim``: names kept as they are (for the model answer: a leaked solution comes with
        its names)."""
        own = _python_tokens(code, verbatim)
        canonical = own
        if len(own) <= CANONICAL_AT_MOST:   # aligning the two costs up to their product
            try:
                canonical = _python_tokens(ast.unparse(_ordered(ast.parse(code))), verbatim)
            except (SyntaxError, ValueError, RecursionError):
                pass
        self.text = "".join(_symbol(t) for t, _, _ in canonical)
        self.spans: list[tuple[int, int] | None] = [None] * len(canonical)
        symbols = [t for t, _, _ in canonical], [t for t, _, _ in own]
        if symbols[0] == symbols[1]:
            self.spans = [(start, end) for _, start, end in own]
            return
        left, right = list(range(len(canonical))), list(range(len(own)))
        for _ in range(3):   # then what was left: a statement the canonical order moved
            matcher = difflib.SequenceMatcher(None, [symbols[0][i] for i in left], [symbols[1][j] for j in right],
                                              autojunk=len(right) > 600)   # a long answer stays fast
            blocks = [b for b in matcher.get_matching_blocks() if b.size >= 2]
            if not blocks:
                break
            for a, b, n in blocks:
                for i in range(n):
                    self.spans[left[a + i]] = own[right[b + i]][1:]
            used = {right[b + i] for a, b, n in blocks for i in range(n)}
            left = [i for i in left if self.spans[i] is None]
            right = [j for j in right if j not in used]

    def passages(self, slices: np.ndarray) -> list[tuple[int, int]]:
        """copydetect's slices (token positions) -> spans of the student's text, on token boundaries."""
        out: list[tuple[int, int]] = []
        for start, end in (() if slices.size == 0 else zip(slices[0], slices[1], strict=True)):
            spans = [s for s in self.spans[int(start):int(end)] if s is not None]
            if spans:
                out.append((spans[0][0], spans[-1][1]))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(out):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged


@functools.lru_cache(maxsize=8192)   # a class's answers repeat: the natural way to write an exercise
def _tokens(code: str, verbatim: bool) -> Tokens:
    return Tokens(code, verbatim)


def _fingerprint(tokens: Tokens, given: np.ndarray | None) -> CodeFingerprint:
    return CodeFingerprint("answer.py", K, 1, given, filter=False, fp=io.StringIO(tokens.text))


def _without(fp: CodeFingerprint, common: set) -> CodeFingerprint:
    """``fp`` less the fingerprints in ``common`` (a copy; ``fp`` itself is kept as it is)."""
    if not (fp.hashes & common):
        return fp
    out = copy.copy(fp)
    out.hashes = fp.hashes - common
    out.hash_idx = {h: where for h, where in fp.hash_idx.items() if h not in common}
    out.token_coverage = get_token_coverage(out.hash_idx, K, len(fp.filtered_code))
    return out


def boilerplate(codes: Iterable[str], verbatim: bool = False) -> np.ndarray:
    """The hashes of every k-gram of the given code (the released notebook's cells)."""
    hashes = [h for code in codes if code.strip() for h in _fingerprint(Tokens(code, verbatim), None).hashes]
    return np.unique(np.array(hashes, dtype=np.int64)) if hashes else np.array([], dtype=np.int64)


def _covered(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``starts`` (one column per k-gram position, the k-gram's weight where it counts, 0
    elsewhere) -> (the tokens those k-grams cover, their weight: each token weighs as the heaviest
    k-gram over it)."""
    length = starts.shape[1]
    over = np.zeros((starts.shape[0], length + K - 1))
    for offset in range(K):   # the k-gram starting at i covers tokens i .. i + K - 1
        np.maximum(over[:, offset:offset + length], starts, out=over[:, offset:offset + length])
    return (over > 0).sum(axis=1), over.sum(axis=1)


def rarity(held: int, answered: int) -> float:
    """The weight of a passage that ``held`` of the ``answered`` students wrote: 0 when more than
    :data:`COMMON_SHARE` of the class (counted as at least :data:`SMALL_CLASS`) holds it, growing as
    the log of how much rarer than that it is."""
    return max(0.0, float(np.log(COMMON_SHARE * max(answered, SMALL_CLASS) / held)))


class Exercise:
    """The answers to one exercise, fingerprinted once, the course's code removed. Each passage
    (k-gram) weighs by how few students hold it (:func:`rarity`); ``prints`` are the fingerprints
    of weight above 0, the passages that are evidence between two students (``own`` keeps them all)."""

    def __init__(self, exercise: str, answers: dict[str, str], given: np.ndarray, verbatim: bool = False,
                 against: str | None = None):
        """``verbatim``: names kept. ``against``: only the pairs with that one (the
        model answer) are computed."""
        self.exercise = exercise
        self.students = sorted(answers)
        self.code = answers
        self.against = against
        self.parsed = {s: _tokens(answers[s], verbatim) for s in self.students}
        self.own = {s: _fingerprint(self.parsed[s], given) for s in self.students}
        self.held = Counter(h for fp in self.own.values() for h in fp.hashes)
        common = {h for h, n in self.held.items() if rarity(n, len(self.students)) <= 0}
        self.prints = {s: _without(fp, common) for s, fp in self.own.items()}
        self.row = {s: i for i, s in enumerate(self.students)}
        self.covered, self.weighed = self.matched()
        self.tokens = np.diagonal(self.covered).copy()
        self.weight = np.diagonal(self.weighed).copy()
        np.fill_diagonal(self.covered, 0)
        np.fill_diagonal(self.weighed, 0)

    def matched(self) -> tuple[np.ndarray, np.ndarray]:
        """[a, b]: the tokens of a's answer that fingerprints shared with b's answer cover, counted
        and weighed (each token by the rarest shared passage over it); [a, a]: a's own."""
        vocabulary: dict[int, int] = {}
        positions, ids = [], []
        for s in self.students:
            pairs = [(i, vocabulary.setdefault(h, len(vocabulary)))
                     for h, where in self.prints[s].hash_idx.items() for i in where]
            pairs.sort()
            positions.append(np.array([p for p, _ in pairs], dtype=np.int64))
            ids.append(np.array([v for _, v in pairs], dtype=np.int64))
        holds = np.zeros((len(self.students), max(len(vocabulary), 1)), dtype=bool)
        weights = np.zeros(max(len(vocabulary), 1))
        for h, v in vocabulary.items():
            weights[v] = rarity(self.held[h], len(self.students))
        for row, these in enumerate(ids):
            holds[row, these] = True
        count = np.zeros((len(self.students), len(self.students)), dtype=np.int64)
        weighed = np.zeros((len(self.students), len(self.students)))
        only = None if self.against is None else [self.students.index(self.against)]
        for a, (where, these) in enumerate(zip(positions, ids, strict=True)):
            if len(where):
                partners = np.arange(len(self.students)) if only is None or [a] == only else np.array(only + [a])
                starts = np.zeros((len(partners), int(where[-1]) + 1))
                starts[:, where] = holds[np.ix_(partners, these)] * weights[these]
                count[a, partners], weighed[a, partners] = _covered(starts)
        return count, weighed

    def pair(self, left: str, right: str) -> Comparison:
        """Two students' answers, from the matrix."""
        a, b = self.row[left], self.row[right]
        tokens, matched = (int(self.tokens[a]), int(self.tokens[b])), (int(self.covered[a, b]), int(self.covered[b, a]))
        score = (self.weighed[a, b] + self.weighed[b, a]) / max(self.weight[a] + self.weight[b], 1e-9)
        return Comparison(self.exercise, left, right, float(score), tokens, matched)

    def _pair(self, left: str, right: str, other: Exercise | None) -> tuple[CodeFingerprint, CodeFingerprint]:
        """Two students' fingerprints, or (with ``other``, the model answer) a student's and the model's."""
        return (self.prints[left], self.prints[right]) if other is None else (self.prints[left], other.prints[right])

    def compare(self, left: str, right: str, other: Exercise | None = None) -> Comparison:
        """One pair through copydetect's own comparison."""
        a, b = self._pair(left, right, other)
        tokens = (int(a.token_coverage), int(b.token_coverage))
        if not (a.hashes & b.hashes):
            return Comparison(self.exercise, left, right, 0.0, tokens, (0, 0))
        overlap, (sim_a, sim_b), _ = compare_files(a, b)
        matched = (round(float(sim_a) * tokens[0]), round(float(sim_b) * tokens[1]))
        return Comparison(self.exercise, left, right, sum(matched) / sum(tokens), tokens, matched)

    def passages(self, left: str, right: str, other: Exercise | None = None) -> tuple[list[tuple[int, int]], ...]:
        """The character spans of each answer's code that match the other, whole tokens of the
        student's own text (copydetect's slices, in tokens, mapped back)."""
        a, b = self._pair(left, right, other)
        if not (a.hashes & b.hashes):
            return [], []
        _, _, (slices_a, slices_b) = compare_files(a, b)
        return (self.parsed[left].passages(slices_a),
                (self if other is None else other).parsed[right].passages(slices_b))


@dataclass
class Similarity:
    threshold: float
    pairs: list[Pair]                 # the listed pairs, most similar first
    model: list[Comparison]           # answers close to the model answer in code of their own, most similar first
    compared: int                     # pairs of students compared
    exercises: dict[str, Exercise]    # the fingerprinted answers, for the pages of the pairs
    reference: dict[str, Exercise]    # each exercise's answers and the model answer, names kept
    scores: list[tuple[str, str, float, int, int]]   # every pair with code in common: (a, b, similarity,
    #                                                   tokens, the fewer of the two's matching tokens)


def compare_class(answers: dict[str, dict[str, str]], given: Iterable[str], model: dict[str, str],
                  threshold: float = THRESHOLD) -> Similarity:
    """``answers``: exercise -> student -> code; ``given``: the released notebooks' code cells;
    ``model``: exercise -> the reference answer. Every pair of students, every exercise."""
    given = list(given)
    given_hashes, given_verbatim = boilerplate(given), boilerplate(given, verbatim=True)
    students = sorted({s for by_student in answers.values() for s in by_student})
    index = {s: i for i, s in enumerate(students)}
    tokens = np.zeros((len(students), len(students)), dtype=np.int64)
    matched = np.zeros_like(tokens)      # [a, b]: a's tokens that b's answers match
    weight = np.zeros((len(students), len(students)))   # the same, weighed by rarity: the score's
    weighed = np.zeros_like(weight)
    exercises: dict[str, Exercise] = {}
    references: dict[str, Exercise] = {}
    to_model: dict[str, list[Comparison]] = {}
    for exercise, by_student in answers.items():
        ex = exercises[exercise] = Exercise(exercise, by_student, given_hashes)
        rows = np.array([index[s] for s in ex.students], dtype=np.int64)
        tokens[np.ix_(rows, rows)] += ex.tokens[:, None] + ex.tokens[None, :]
        matched[np.ix_(rows, rows)] += ex.covered
        both = ex.weight[:, None] + ex.weight[None, :]
        vote = np.log1p(both)   # one long exercise in common cannot carry the assignment
        weight[np.ix_(rows, rows)] += vote
        weighed[np.ix_(rows, rows)] += vote * (ex.weighed + ex.weighed.T) / np.maximum(both, 1e-9)
        if exercise in model:
            ref = references[exercise] = Exercise(exercise, {**by_student, MODEL: model[exercise]}, given_verbatim,
                                                  verbatim=True, against=MODEL)
            for s in ex.students:
                to_model.setdefault(s, []).append(ref.pair(s, MODEL))
    np.fill_diagonal(tokens, 0)
    fewer = np.minimum(matched, matched.T)
    score = np.where(weight > 0, weighed / np.maximum(weight, 1e-9), 0.0)
    listed = np.triu((score >= threshold) & (fewer >= MIN_TOKENS), 1)
    pairs = []
    for a, b in zip(*np.nonzero(listed), strict=True):
        left, right = students[a], students[b]
        comparisons = [exercises[e].pair(left, right) for e in answers
                       if left in exercises[e].code and right in exercises[e].code]
        pairs.append(Pair(left, right, float(score[a, b]), int(tokens[a, b]), (int(matched[a, b]), int(matched[b, a])),
                          sorted((c for c in comparisons if sum(c.matched)), key=lambda c: -c.similarity)))
    pairs.sort(key=lambda p: (-p.similarity, p.left, p.right))
    upper = np.triu(matched > 0, 1)
    scores = [(students[a], students[b], float(score[a, b]), int(tokens[a, b]), int(fewer[a, b]))
              for a, b in zip(*np.nonzero(upper), strict=True)]
    close = []
    for student, found in to_model.items():   # over the assignment, as a pair of students
        both = [np.log1p(sum(float(references[c.exercise].weight[references[c.exercise].row[n]])
                             for n in (student, MODEL))) for c in found]
        near = sum(c.similarity * w for c, w in zip(found, both, strict=True))
        least = min(sum(c.matched[i] for c in found) for i in (0, 1))
        if sum(both) and near / sum(both) >= threshold and least >= MIN_TOKENS:
            close += [c for c in found if sum(c.matched)]
    return Similarity(threshold, pairs, sorted(close, key=lambda c: (-c.similarity, c.left, c.exercise)),
                      len(students) * (len(students) - 1) // 2, exercises, references, scores)

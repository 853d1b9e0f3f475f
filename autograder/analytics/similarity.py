"""Code similarity between students' answers: evidence for a person to read, never a verdict.

Each student's answer to each exercise (the answer cell, as graded) is fingerprinted with
`copydetect <https://github.com/blingenf/copydetect>`_ (MIT, on PyPI): Schleimer, Wilkerson and
Aiken's winnowing, the algorithm behind MOSS, on Pygments tokens in which every variable name is
``V``, every function name ``F`` and every string ``S``, comments and whitespace dropped. So a copy
with renamed variables, other comments or other spacing fingerprints as the original, and a
reordered pair of independent statements keeps the fingerprints inside each statement.

* **Boilerplate**: every k-gram of the released notebook's code (signatures, docstrings, the given
  helpers, the stubs) is removed from every answer: what the course gave is never evidence.
* **Common passages**: a passage that more than :data:`COMMON` students share is the natural way to
  write that exercise, not evidence between two of them (MOSS's ``-m``, whose default is 10); it
  still counts against the model answer.
* **Short answers**: an answer with fewer than :data:`MIN_TOKENS` tokens left after that
  (``return a * b``) takes part in no exercise's flag, and weighs in a pair's assignment score by
  its size only.
* **Scores**: copydetect's similarity of an answer to another is the share of its tokens (those
  its fingerprints cover) that fingerprints shared with the other cover. For one exercise a pair's
  score is both answers' covered tokens over both answers' tokens; for the assignment, the same
  sums over every exercise both students answered. A pair is flagged at :data:`THRESHOLD` or
  above, on the assignment (with at least two short answers' worth of code) or on one exercise.
* **The model answer**: each answer is also compared with the reference (the source notebook's
  solution); one at the threshold is flagged as close to the model answer (a leaked solution?).

copydetect compares two files at a time in Python (about 1 ms a pair here: 45,000 pairs and 18
exercises for 300 students would take 15 minutes), so every pair's score is computed here at once
from copydetect's fingerprints (the same union of covered tokens as its ``compare_files``, as a
matrix per exercise), and ``compare_files`` itself gives the matching passages of the pairs shown.
Every k-gram is kept (copydetect's default window of 1: its guarantee threshold equals its noise
threshold), so the scores do not depend on Python's per-process string hashing, which winnowing's
choice of fingerprints would.
"""
from __future__ import annotations

import copy
import io
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage

from autograder.analytics import MIN_TOKENS, THRESHOLD

K = 15            # tokens (characters of the filtered code) in a fingerprint: copydetect's noise threshold
COMMON = 10       # a passage more students than this share is the natural way to write it (MOSS's -m 10)
MODEL = "model answer"


@dataclass(frozen=True)
class Comparison:
    """Two answers to one exercise (or an answer and the model answer)."""
    exercise: str
    left: str
    right: str
    similarity: float          # 0..1, both answers' covered tokens over both answers' tokens
    tokens: tuple[int, int]    # each answer's tokens once the boilerplate is removed
    matched: tuple[int, int]   # each answer's tokens covered by fingerprints of the other

    @property
    def judged(self) -> bool:
        """Both answers long enough to be evidence."""
        return min(self.tokens) >= MIN_TOKENS


@dataclass
class Pair:
    """Two students over the assignment: every exercise both answered."""
    left: str
    right: str
    similarity: float
    tokens: int
    comparisons: list[Comparison] = field(default_factory=list)   # the exercises with something in common

    def flagged_exercises(self, threshold: float) -> list[Comparison]:
        return [c for c in self.comparisons if c.judged and c.similarity >= threshold]


def _fingerprint(code: str, given: np.ndarray | None) -> CodeFingerprint:
    return CodeFingerprint("answer.py", K, 1, given, filter=True, language="python", fp=io.StringIO(code))


def _without(fp: CodeFingerprint, common: set) -> CodeFingerprint:
    """``fp`` less the fingerprints in ``common`` (a copy; ``fp`` itself is kept as it is)."""
    if not (fp.hashes & common):
        return fp
    out = copy.copy(fp)
    out.hashes = fp.hashes - common
    out.hash_idx = {h: where for h, where in fp.hash_idx.items() if h not in common}
    out.token_coverage = get_token_coverage(out.hash_idx, K, len(fp.filtered_code))
    return out


def boilerplate(codes: Iterable[str]) -> np.ndarray:
    """The hashes of every k-gram of the given code (the released notebook's cells)."""
    hashes = [h for code in codes if code.strip() for h in _fingerprint(code, None).hashes]
    return np.unique(np.array(hashes, dtype=np.int64)) if hashes else np.array([], dtype=np.int64)


def _covered(starts: np.ndarray, length: int) -> np.ndarray:
    """Rows of ``starts`` (bool, one column per k-gram position) -> tokens covered by those k-grams."""
    marks = np.zeros((starts.shape[0], length + 2 * K), dtype=np.int32)
    marks[:, K:K + length] = starts
    running = np.cumsum(marks, axis=1)   # [c]: the k-grams starting at c - K or before
    return ((running[:, K:] - running[:, :-K]) > 0).sum(axis=1)  # token j: a k-gram starts in j-K+1..j


class Exercise:
    """The answers to one exercise, fingerprinted once, the course's code removed; between students,
    the passages more than :data:`COMMON` of them share are removed too (``own`` keeps them, for the
    comparison with the model answer)."""

    def __init__(self, exercise: str, answers: dict[str, str], given: np.ndarray):
        self.exercise = exercise
        self.students = sorted(answers)
        self.code = answers
        self.own = {s: _fingerprint(answers[s], given) for s in self.students}
        held = Counter(h for fp in self.own.values() for h in fp.hashes)
        common = {h for h, n in held.items() if n > COMMON}
        self.prints = {s: _without(fp, common) for s, fp in self.own.items()}
        self.tokens = np.array([int(self.prints[s].token_coverage) for s in self.students], dtype=np.int64)
        self.row = {s: i for i, s in enumerate(self.students)}
        self.covered = self.matched()

    def matched(self) -> np.ndarray:
        """[a, b]: the tokens of a's answer that fingerprints shared with b's answer cover."""
        vocabulary: dict[int, int] = {}
        positions, ids = [], []
        for s in self.students:
            pairs = [(i, vocabulary.setdefault(h, len(vocabulary)))
                     for h, where in self.prints[s].hash_idx.items() for i in where]
            pairs.sort()
            positions.append(np.array([p for p, _ in pairs], dtype=np.int64))
            ids.append(np.array([v for _, v in pairs], dtype=np.int64))
        holds = np.zeros((len(self.students), max(len(vocabulary), 1)), dtype=bool)
        for row, these in enumerate(ids):
            holds[row, these] = True
        out = np.zeros((len(self.students), len(self.students)), dtype=np.int64)
        for a, (where, these) in enumerate(zip(positions, ids, strict=True)):
            if len(where):
                starts = np.zeros((len(self.students), int(where[-1]) + 1), dtype=bool)
                starts[:, where] = holds[:, these]
                out[a] = _covered(starts, int(where[-1]) + 1)
        np.fill_diagonal(out, 0)
        return out

    def pair(self, left: str, right: str) -> Comparison:
        """Two students' answers, from the matrix."""
        a, b = self.row[left], self.row[right]
        tokens, matched = (int(self.tokens[a]), int(self.tokens[b])), (int(self.covered[a, b]), int(self.covered[b, a]))
        return Comparison(self.exercise, left, right, sum(matched) / max(sum(tokens), 1), tokens, matched)

    def _pair(self, left: str, right: str, other: Exercise | None) -> tuple[CodeFingerprint, CodeFingerprint]:
        """Two students' fingerprints, or (with ``other``, the model answer) a student's own and the model's."""
        return (self.prints[left], self.prints[right]) if other is None else (self.own[left], other.own[right])

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
        """The character spans of each answer's code that match the other (copydetect's slices)."""
        a, b = self._pair(left, right, other)
        if not (a.hashes & b.hashes):
            return [], []
        _, _, (slices_a, slices_b) = compare_files(a, b)
        return _spans(slices_a), _spans(slices_b)


def _spans(slices: np.ndarray) -> list[tuple[int, int]]:
    return [] if slices.size == 0 else [(int(s), int(e)) for s, e in zip(slices[0], slices[1], strict=True)]


@dataclass
class Similarity:
    threshold: float
    pairs: list[Pair]                 # the flagged pairs, most similar first
    model: list[Comparison]           # answers at the threshold of the model answer, most similar first
    compared: int                     # pairs of students compared
    exercises: dict[str, Exercise]    # the fingerprinted answers, for the pages of the pairs
    reference: dict[str, Exercise]    # the model answer of each exercise, fingerprinted
    scores: list[tuple[str, str, float, int]]   # every pair with code in common: (a, b, similarity, tokens)


def compare_class(answers: dict[str, dict[str, str]], given: Iterable[str], model: dict[str, str],
                  threshold: float = THRESHOLD) -> Similarity:
    """``answers``: exercise -> student -> code; ``given``: the released notebooks' code cells;
    ``model``: exercise -> the reference answer. Every pair of students, every exercise."""
    given_hashes = boilerplate(given)
    students = sorted({s for by_student in answers.values() for s in by_student})
    index = {s: i for i, s in enumerate(students)}
    tokens = np.zeros((len(students), len(students)), dtype=np.int64)
    matched = np.zeros_like(tokens)
    exercises: dict[str, Exercise] = {}
    references: dict[str, Exercise] = {}
    flagged_on: dict[tuple[str, str], list[str]] = {}
    to_model: list[Comparison] = []
    for exercise, by_student in answers.items():
        ex = exercises[exercise] = Exercise(exercise, by_student, given_hashes)
        rows = np.array([index[s] for s in ex.students], dtype=np.int64)
        both = ex.tokens[:, None] + ex.tokens[None, :]
        covered = ex.covered
        tokens[np.ix_(rows, rows)] += both
        matched[np.ix_(rows, rows)] += covered + covered.T
        long_enough = np.minimum(ex.tokens[:, None], ex.tokens[None, :]) >= MIN_TOKENS
        hit = long_enough & ((covered + covered.T) >= threshold * np.maximum(both, 1)) & (both > 0)
        for a, b in zip(*np.nonzero(np.triu(hit, 1)), strict=True):
            flagged_on.setdefault((ex.students[a], ex.students[b]), []).append(exercise)
        if exercise in model:
            ref = references[exercise] = Exercise(exercise, {MODEL: model[exercise]}, given_hashes)
            to_model += [c for s in ex.students if (c := ex.compare(s, MODEL, ref)).judged
                         and c.similarity >= threshold]
    np.fill_diagonal(tokens, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(tokens > 0, matched / np.maximum(tokens, 1), 0.0)
    overall = (score >= threshold) & (tokens >= 2 * MIN_TOKENS)
    pairs = []
    for a, b in zip(*np.nonzero(np.triu(overall, 1) | np.triu(overall, 1).T), strict=True):
        if a < b:
            flagged_on.setdefault((students[a], students[b]), [])
    for (left, right) in flagged_on:
        a, b = index[left], index[right]
        comparisons = [exercises[e].pair(left, right) for e in answers
                       if left in exercises[e].code and right in exercises[e].code]
        pairs.append(Pair(left, right, float(score[a, b]), int(tokens[a, b]),
                          sorted((c for c in comparisons if sum(c.matched)), key=lambda c: -c.similarity)))
    pairs.sort(key=lambda p: (-p.similarity, p.left, p.right))
    upper = np.triu(matched > 0, 1)
    scores = [(students[a], students[b], float(score[a, b]), int(tokens[a, b])) for a, b in zip(*np.nonzero(upper),
                                                                                               strict=True)]
    return Similarity(threshold, pairs, sorted(to_model, key=lambda c: (-c.similarity, c.left, c.exercise)),
                      len(students) * (len(students) - 1) // 2, exercises, references, scores)

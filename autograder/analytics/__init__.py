"""What the class did, for the instructor: read from the gradebook and the judge's verdicts.

``gradebook`` (what each student earned, and the judge's messages), ``misconceptions`` (the failing
students of an exercise grouped by the bug the message names), ``statistics`` (per exercise),
``similarity`` (code similarity, winnowing through copydetect), ``plots`` and ``page`` (the
instructor's page and the data behind it). ``autograder report`` writes them.
"""

THRESHOLD = 0.7   # code similarity: share of both answers covered by the other (tests/grader/test_report_similarity.py)
MIN_TOKENS = 40   # an answer shorter than this (the course's code removed) flags no one

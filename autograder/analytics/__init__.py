"""What the class did, for the instructor: read from the gradebook and the judge's verdicts.

``gradebook`` (what each student earned, and the judge's verdicts: message and kind), ``misconceptions``
(the failing students of an exercise grouped by the verdict's kind and the bug the message names),
``statistics`` (per exercise), ``similarity`` (code similarity, winnowing through copydetect),
``plots`` and ``page`` (the instructor's page and the data behind it, rendered from
``autograder/templates/class_report/``). ``autograder report`` writes them.
"""

THRESHOLD = 0.85  # code similarity: rarity-weighted share of both students' code that matches (similarity.py)
MIN_TOKENS = 30   # Python tokens of each student's code (passages that weigh) that must match to list a pair

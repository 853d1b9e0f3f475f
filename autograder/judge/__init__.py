"""The trusted judge: decides every score, and never runs student code.

The judge starts a sandbox per exercise (:mod:`.session`), sends it the student's cells and the
engine to run them in, and then drives the student's answer through proxies (:mod:`.session`):
every call it makes on the answer is executed in the sandbox on inputs the judge chose, and
only plain data (numbers, strings, arrays loaded with ``allow_pickle=False``) comes back. The
hidden checks (``autograder/exercises``) compare that data with the reference, computed here.
"""

"""What runs inside the sandbox, beside untrusted student code.

Only the standard library and NumPy: this folder is the one part of ``autograder`` that is
mounted (read-only) into the sandbox, so nothing here may import the rest of the package, and
nothing here decides a score. ``wire`` is the message format both sides speak; ``runner`` is
the process that executes a student's cells and answers the trusted judge's requests.
"""

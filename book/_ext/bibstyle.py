"""Author-year labels on the bibliography page, to match the author-year citations in the text.

The chapters cite "Chellapilla et al. (2006)" (`bibtex_reference_style: author_year` in
_config.yml), but sphinxcontrib-bibtex labels the entries of the bibliography page with the label
style of its pybtex formatting style, "alpha" by default: "[CPS06]", a label the reader finds
nowhere in the text. This registers a formatting style, `authoryear`, that labels each entry as
its citations read ("Chellapilla et al., 2006") and sorts the page by author and year;
_config.yml selects it with `bibtex_default_style: authoryear`.
"""
from __future__ import annotations

from collections import Counter
from string import ascii_lowercase

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    """A person's surname as plain text: LaTeX accents resolved, braces dropped."""
    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


def _label(entry) -> str:
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(person) for person in persons]
    if not names:
        who = entry.fields.get("key", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """"Surname, year", "A and B, year" or "A et al., year"; a, b, ... after the year when two
    entries would share a label."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [_label(entry) for entry in entries]
        shared = Counter(labels)
        seen: Counter[str] = Counter()
        for label in labels:
            if shared[label] > 1:
                seen[label] += 1
                yield label + ascii_lowercase[seen[label] - 1]
            else:
                yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"


def setup(app):
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

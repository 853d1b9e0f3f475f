"""A length of time as the people who read our messages and pages read it."""


def span_text(seconds: float) -> str:
    """A length of time as a person reads it: 2 days 3 h, 5 h 20 min, 12 min."""
    minutes = max(1, round(seconds / 60))
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    out = ([f"{days} day{'s' if days != 1 else ''}"] if days else []) + ([f"{hours} h"] if hours else []) \
        + ([f"{minutes} min"] if minutes and not days else [])
    return " ".join(out) or "0 min"

"""What a cell's record of the grid holds, read as the tables print it.

A cell's status (`DONE`, `FAILED`), its Spearman on a split or on the
average of bojone/SimCSE's three (`split_text`), and the a / b / c it
compares with Su's published cell (`cell_columns`). Standard library
only: the columns (`kcse.experiments.columns`) and the tables
(`kcse.experiments.results`) both read it.
"""

DONE, FAILED = "done", "failed"

# The splits bojone/SimCSE's eval.py scores, in its order; `avg` and `w-avg`
# (weighted by pairs) average them.
AVERAGED_SPLITS = ("train", "valid", "test")
AVERAGES = {"avg": False, "w-avg": True}


def reported(cell, column):
    """`(spearman, std)` of a cell's column on its reported split (None if absent)."""
    scores = cell.get(column)
    if not scores:
        return None, None
    entry = scores[cell["reported_split"]]
    return entry["spearman"], entry.get("spearman_std")


def number(value):
    return "n/a" if value is None else f"{value:.2f}"


# Su's colour rule ("if c > b, c is shown in green, otherwise in red",
# kexue.fm/archives/8348), as a mark after c in results.md and su_table.md.
C_BEATS_B, C_DOES_NOT_BEAT_B = "▲", "▼"


def c_beats_b(b, c):
    """Whether c beats b, as Su colours c; None when either is missing."""
    return None if b is None or c is None else c > b


def marked(text, b, c):
    """`text` (c as printed) and Su's mark of c beside b (`c_beats_b`),
    where both are numbers."""
    beats = c_beats_b(b, c)
    return text if beats is None else f"{text} {C_BEATS_B if beats else C_DOES_NOT_BEAT_B}"


def published_text(published):
    """Su's published `(a, b, c)` as the tables print it, c marked."""
    a, b, c = published
    return f"{a:.2f} / {b:.2f} / {marked(f'{c:.2f}', b, c)}"


def cell_columns(cell):
    """A cell's printed a, b, c, c's std, seeds, Su's a / b / c and Δ a / b / c.

    c is the mean over the seeds and std their sample standard deviation
    ("-" for one seed: no spread was measured); a failed cell shows why.
    c, ours and Su's, is marked where it beats b and where not, as Su
    colours it (`marked`).
    """
    a, _ = reported(cell, "raw")
    b, _ = reported(cell, "whitening")
    seeds = len(cell.get("runs", [])) or 1
    if cell["status"] == FAILED:
        c, c_text, std_text = None, f"failed: {cell['error']}", "-"
    elif not cell.get("trained"):  # The task has nothing to train on.
        c, c_text, std_text, seeds = None, "-", "-", 0
    else:
        c, std = reported(cell, "trained")
        seeds = cell["trained"][cell["reported_split"]].get("runs", 1)
        c_text, std_text = marked(number(c), b, c), "-" if std is None else number(std)
    published = cell.get("published")
    if not published:
        return number(a), number(b), c_text, std_text, str(seeds), "-", "-"
    deltas = [
        "n/a" if ours is None else f"{ours - theirs:+.2f}"
        for ours, theirs in zip((a, b, c), published)
    ]
    return (number(a), number(b), c_text, std_text, str(seeds),
            published_text(published), " / ".join(deltas))


def split_text(scores, split):
    """The Spearman of `scores` on `split` (`split_value`) as printed; `-`
    where there is no such number."""
    value = split_value(scores, split)
    return "-" if value is None else number(value)


def split_value(scores, split):
    """The Spearman of `scores` (`{split: {"spearman", "n", ...}}`) on
    `split`, or on `"avg"`, `"w-avg"` (`split_average`); None where there
    is no such number."""
    if split in AVERAGES:
        return split_average(scores, AVERAGES[split])
    return scores[split]["spearman"] if split in scores else None


def split_average(scores, weighted=False):
    """The mean Spearman of train, valid and test (`weighted`: weighted by
    their pairs), as bojone/SimCSE's eval.py prints `avg` and `w-avg`;
    None unless `scores` has all three splits."""
    if any(split not in scores for split in AVERAGED_SPLITS):
        return None
    entries = [scores[split] for split in AVERAGED_SPLITS]
    weights = [entry["n"] if weighted else 1 for entry in entries]
    return sum(w * entry["spearman"] for w, entry in zip(weights, entries)) / sum(weights)

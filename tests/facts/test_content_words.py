"""Content coverage (SPEC §2 step 4, "Content, not only facts" and "Layout is not content"):
the rule through :func:`arrowdedup.fact_conflict`, on the patterns the held-out reading found,
on the worked examples, and on layout."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from arrowdedup import fact_conflict
from arrowdedup.facts import code_lines
from arrowdedup.facts import content as cw
from arrowdedup.facts import tables as fact_tables
from arrowdedup.facts.detail import guard_details

# -- paraphrase still merges -----------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), [
    # SPEC §2's worked example: both merge into A.
    ("ML systems need data for training", "Machine learning models require training data"),
    ("Training data is essential for ML", "Machine learning models require training data"),
    # SPEC §4's example.
    ("Configure auth using the config.yaml file",
     "Authentication is configured via config.yaml"),
    # Inflection, voice and spelling variants.
    ("Send data over HTTP", "Data is sent over HTTP"),
    ("The colour of the button", "The color of the button"),
    ("A man plays a guitar.", "A man is playing the guitar."),
    # The representative may say more.
    ("Create a bucket", "Create a bucket in the console"),
])
def test_paraphrase_merges(a: str, b: str) -> None:
    assert fact_conflict(a, b) is None


# -- what the fact guard let through, and the content rule refuses ----------------------------


@pytest.mark.parametrize(("a", "b"), [
    # The same template with another content word.
    ("Return the token ID for the issued token", "Return the token ID for the token to refresh"),
    ("Remove key cart and print the removed entry", "Remove keys with the prefix cart"),
    ("Enabling tracing for one project", "Enabling tracing for all projects"),
    ("Run the login command first", "Run the logout command first"),
    ("Set the counter = 0 before the loop", "Set the counter != 0 before the loop"),
    # A clause the representative lacks.
    ("The cluster is unavailable while a new primary is chosen. This takes one election "
     "round.", "The cluster is unavailable while a new primary is chosen."),
    # A change of role.
    ("Tool, general", "What is the tool?"),
])
def test_lost_content_refused(a: str, b: str) -> None:
    assert fact_conflict(a, b) == "content"


@pytest.mark.parametrize(("a", "b"), [
    # Opposites present in both texts, in swapped places.
    ("Tracing is enabled and metrics are disabled", "Tracing is disabled and metrics are enabled"),
    # An order that is the point.
    ("Why prefer a file over flags", "Why prefer flags over a file"),
    ("Steps: parse → verify", "Steps: verify → parse"),
])
def test_swapped_places_refused(a: str, b: str) -> None:
    assert fact_conflict(a, b) == "content"


def test_negation_must_stand_on_the_same_word() -> None:
    # Both negate, but not the same thing.
    assert fact_conflict("Do not restart the collector; reload its config",
                         "Restart the collector; do not reload its config") == "content"
    # The same negation written another way still merges.
    assert fact_conflict("The exporter does not support gzip",
                         "The exporter doesn't support gzip") is None


def test_facts_still_come_first() -> None:
    assert fact_conflict("Upgrade from 3.4 to 3.5", "Upgrade from 3.3 to 3.4") == "version"
    assert fact_conflict("Deploy without an override", "Deploy with an override") == "negation"


# -- layout is not content --------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "kind"), [
    ("2. Create a bucket", "1. Create a bucket", None),
    ("- Update Pip:", "1. Update pip:", None),
    ("## Install the Collector", "# Install the collector", "heading"),
    ("See the <b>setup</b> guide", "See the **setup** guide", None),
])
def test_layout_merges(a: str, b: str, kind: str | None) -> None:
    assert fact_conflict(a, b, segment_type=kind) is None


@pytest.mark.parametrize(("a", "b", "want"), [
    ('f(ctx,"a/b")', 'f(ctx, "a/b")', None),                      # white space in code
    ("    run --fast\n", "run --fast", None),                        # indentation
    ("tool defrag", "# defragment first\ntool defrag", None),       # an added comment
    ("$ tool defrag", "$ tool defrag\ndone in 3s", None),            # an added output line
    ("tool defrag", "tool defrag --all", "content"),                # another command
    ("tool defrag\ntool check", "tool defrag", "content"),          # a line lost
    ("$ tool defrag", "$ tool defrag\n$ tool check", "content"),    # a command added
])
def test_code_by_line(a: str, b: str, want: str | None) -> None:
    assert fact_conflict(a, b, segment_type="code") == want


@pytest.mark.parametrize(("a", "b"), [
    ("Configuration", "Advanced configuration"),
    ("Stratified sampling", "What is stratified sampling?"),
    ("UpDownCounter", "Creating an UpDownCounter"),
])
def test_headings_compare_every_word_both_ways(a: str, b: str) -> None:
    # A heading names its section: one that says more or less is another section.
    assert fact_conflict(a, b, segment_type="heading") == "content"
    assert fact_conflict(b, a, segment_type="heading") == "content"
    assert fact_conflict("Use Instrumentation Libraries", "Using instrumentation libraries",
                         segment_type="heading") is None


def test_code_line_kinds() -> None:
    kinds = code_lines.code_line_kinds(pl.Series(["$ make", "built", "# why", "> out"]))
    assert kinds.to_list() == ["command", "output", "comment", "output"]
    plain = code_lines.code_line_kinds(pl.Series(["make", "// note", "make install"]))
    assert plain.to_list() == ["command", "comment", "command"]


# -- languages --------------------------------------------------------------------------------


def test_other_languages_stem_and_refuse() -> None:
    assert fact_conflict("Configura el exportador", "Configurar el exportador",
                         language="es") is None
    assert fact_conflict("Crear las trazas manualmente", "Crear las métricas manualmente",
                         language="es") == "content"
    assert fact_conflict("Configurer le récepteur", "Configurer l'exportateur",
                         language="fr") == "content"


def test_function_words_are_not_content() -> None:
    rows = np.arange(1, dtype=np.int64)
    words = cw.word_table(pl.Series(["The collector is on the host"]), pl.Series(["en"]), rows)
    content = words.filter(pl.col("content")).get_column("tok").to_list()
    assert content == ["collector", "host"]


# -- the detail column ------------------------------------------------------------------------


def test_guard_details_name_the_words() -> None:
    a = pl.Series(["Enabling tracing for one project", "tool defrag", "Upgrade to 3.5"])
    b = pl.Series(["Enabling tracing for all projects", "tool defrag --all", "Upgrade to 3.4"])
    reason = pl.Series(["content", "content", "version"])
    kinds = pl.Series(["paragraph", "code", "paragraph"])
    got = guard_details(a, b, reason, segment_type=kinds).to_list()
    assert got[0] == "one"
    assert got[1] == "tool defrag; + tool defrag --all"
    assert got[2] == "3.5"


def test_signature_kinds_sorted_after_facts() -> None:
    from arrowdedup.facts.guard import fact_signatures
    from arrowdedup.facts.tables import KIND_SHIFT

    sig = fact_signatures(pl.Series(["Enable tracing on 3 hosts"]))[0].to_list()
    kinds = [v >> int(KIND_SHIFT) for v in sig]
    assert kinds == sorted(kinds)
    assert fact_tables.CONTENT in kinds and 1 in kinds  # the number and the content words


def test_a_negation_is_one_fact_in_every_script() -> None:
    from arrowdedup.facts.guard import fact_signatures
    from arrowdedup.facts.tables import KIND_SHIFT, NEGATION

    sig = fact_signatures(pl.Series(["不支持", "支持しない", "Do not do it"]))
    negations = [{v for v in row if v >> int(KIND_SHIFT) == NEGATION} for row in sig.to_list()]
    assert negations[0] == negations[1] == negations[2] and len(negations[0]) == 1

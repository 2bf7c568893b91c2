"""The fact guard's rule (arrowdedup.facts.guard): what counts as a fact, the covers test, and the
signature column."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup import SchemaError, fact_conflict, fact_signatures
from arrowdedup.facts import guard as F
from arrowdedup.facts import scan_jit as fact_scan
from arrowdedup.facts import tables as fact_tables

# (segment a, representative b, segment type, language, expected reason): the patterns of
# real cosine-only merges on technical documentation, with the names changed.
REFUSED = [
    ("message GetResponse", "message PutResponse", "heading", None, "identifier"),
    ("Use --peer-tls for TLS between peers", "Use --client-tls for TLS with clients", None,
     None, "identifier"),
    ("Min_Revision - the lower bound", "Max_Revision - the upper bound", None, None,
     "identifier"),
    ("requests_received_total counts requests", "requests_sent_total counts requests", None,
     None, "identifier"),
    ("Member 3:", "Member 2:", None, None, "number"),
    ("### Small cluster", "### Large cluster", "heading", None, "opposite"),
    # Code is compared by line (rules 18.0): another line is content.
    ("$ server --name node0 --ip 10.0.0.10", "$ server --name node1 --ip 10.0.0.11", "code",
     None, "content"),
    ("clients: 1k latency 217MB", "clients: 2k latency 417MB", None, None, "number"),
    ("$ tool defrag", "$ tool defrag --all", "code", None, "content"),
    ("Upgrade from 3.4 to 3.5", "Upgrade from 3.3 to 3.4", None, None, "version"),
    ("Keys rotate every 90 days.", "Keys rotate every 30 days.", None, None, "number"),
    ("Restart the server.", "Don't restart the server.", None, None, "negation"),
    ("Enable the exporter.", "Disable the exporter.", None, None, "opposite"),
    ("Released in January 2024.", "Released in February 2024.", None, None, "date"),
    ("The job runs at 10:30.", "The job runs at 10:45.", None, None, "date"),
    ("Use `config` here.", "Use config here.", None, None, "identifier"),
    ("See https://example.org/a for details.", "See https://example.org/b for details.", None,
     None, "identifier"),
    # A name is a content word in any case (rules 18.0): another name is another word.
    ("The exporter sends spans to Jaeger.", "The exporter sends spans to Zipkin.", None, None,
     "content"),
    ("Version 3.5 is out.", "Version 3.50 is out.", None, None, "version"),
    # What the fact guard let through and content coverage refuses (rules 18.0): another verb,
    # a qualifier only the segment states, another word for the same slot.
    ("Die Anwendung speichert Daten.", "Die Anwendung sichert Daten.", None, "de", "content"),
    ("Register a no-op exporter.", "Register an exporter.", None, None, "content"),
    ("Fetch the next page.", "Fetch the previous page.", None, None, "content"),
    ("Die Konfiguration ist einfach.", "Die Konfiguration ist nicht einfach.", None, "de",
     "negation"),
    ("Es gibt 10.000 Nutzer.", "Es gibt 20.000 Nutzer.", None, "de", "number"),
    ("Il faut redémarrer le serveur.", "Il ne faut pas redémarrer le serveur.", None, "fr",
     "negation"),
    ("Hay que reiniciar el servidor.", "No hay que reiniciar el servidor.", None, "es",
     "negation"),
    ("这个功能支持导出", "这个功能不支持导出", None, "zh", "negation"),
    ("この機能を使います", "この機能を使いません", None, "ja", "negation"),
    # A number after a currency sign; an acronym (three letters or more) is a term.
    ("It costs $5 a month.", "It costs $50 a month.", None, None, "number"),
    ("Send a GET request.", "Send a POST request.", None, None, "identifier"),
    ("TCP carries the data.", "UDP carries the data.", None, None, "identifier"),
    ("Write the config as JSON.", "Write the config as YAML.", None, None, "identifier"),
    ("Clients MUST retry.", "Clients SHOULD retry.", None, None, "identifier"),
    # Scripts without case: their words are the terms (katakana words, pairs of Han
    # characters or Hangul syllables, words of other such scripts).
    ("トレースに使用するエクスポーターを指定します。",
     "メトリクスに使用するエクスポーターを指定します。", None, "ja", "identifier"),
    ("エントリの取得", "エントリの設定", "heading", "ja", "identifier"),
    ("詳細については、#1744 を参照してください。", "詳細については、#1745 を参照してください。",
     None, "ja", "number"),
    # A name inside a Chinese or Japanese sentence (no space before it) is a name, and a
    # content word (rules 18.0: names are left to the content words, in any case).
    ("詳細についてはJavaエージェントを参照してください。",
     "詳細についてはPythonエージェントを参照してください。", None, "ja", "content"),
    ("配置处理器不会启用它。", "配置接收器不会启用它。", None, "zh", "identifier"),
    ("认证已启用。", "认证已禁用。", None, "zh", "identifier"),
    ("로그 수집기를 설정합니다.", "로그 내보내기를 설정합니다.", None, "ko", "identifier"),
    ("기능이 활성화되어 있습니다.", "기능이 비활성화되어 있습니다.", None, "ko", "negation"),
    ("এটি সক্রিয় করুন", "এটি নিষ্ক্রিয় করুন", None, "bn", "identifier"),
    # More of the closed list of opposites, and its forms in more languages.
    ("Use an odd number of members.", "Use an even number of members.", None, None,
     "opposite"),
    ("Writes go to the leader.", "Writes go to a follower.", None, None, "opposite"),
    ("Use a static IP address.", "Use a dynamic IP address.", None, None, "opposite"),
    ("The call is blocking.", "The call is non-blocking.", None, None, "opposite"),
    ("Reads are permitted.", "Reads are forbidden.", None, None, "opposite"),
    ("La autenticación está habilitada.", "La autenticación está deshabilitada.", None, "es",
     "opposite"),
    ("A autenticação está habilitada.", "A autenticação está desabilitada.", None, "pt",
     "opposite"),
    ("Autentificarea este activată.", "Autentificarea este dezactivată.", None, "ro",
     "opposite"),
    ("Автентифікацію увімкнено.", "Автентифікацію вимкнено.", None, "uk", "opposite"),
    ("Uwierzytelnianie jest włączone.", "Uwierzytelnianie jest wyłączone.", None, "pl",
     "opposite"),
    # The parts of a hyphenated word state what they would alone (pairs the merge audit of
    # the English corpus found merged): a number word, an opposite, a date.
    ("It runs as a four-stage pipeline:", "It runs as a three-stage pipeline:", None, None,
     "number"),
    ("Run twenty-five replicas.", "Run twenty-six replicas.", None, None, "number"),
    ("Server-side metrics, when OBI instruments an application that serves requests:",
     "Client-side metrics, when OBI instruments an application that sends requests:", None,
     None, "opposite"),
    ("Use a push-based exporter.", "Use a pull-based exporter.", None, None, "opposite"),
    ("The release ships mid-June.", "The release ships in July.", None, None, "date"),
    ("Incoming requests", "Outgoing requests", "heading", None, "opposite"),
    ("Single instrumentation", "Multiple instrumentations", "heading", None, "opposite"),
    ("Programmatic SDK setup", "Declarative SDK setup", "heading", None, "opposite"),
    ("OpenTelemetry Demo Old Front-end", "OpenTelemetry Demo New Front-end", None, None,
     "opposite"),
]

COVERED = [
    # SPEC §2's worked example: paraphrases with the same facts still merge.
    ("ML systems need data for training", "Machine learning models require training data",
     None, None),
    ("Training data is essential for ML", "Machine learning models require training data",
     None, None),
    ("Configure auth using the config.yaml file",
     "Authentication is configured via config.yaml", None, None),
    ("Do not restart the server.", "Don't restart the server.", None, None),
    ("Do not restart the server.", "Don’t restart the server.", None, None),
    ("There are 10,000 users.", "There are 10000 users.", None, None),
    ("Es gibt 10.000 Nutzer.", "Es gibt 10000 Nutzer.", None, "de"),
    ("Der Wert ist 1,5.", "Der Wert beträgt 1,5.", None, "de"),
    ("Three people were hurt.", "3 people were hurt.", None, None),
    ("Use 1.5 GB of memory.", "Use 1.5GB of memory.", None, None),
    ("Wait 5 seconds.", "Wait 5s.", None, None),
    ("Use v3.5 or later.", "Use 3.5 or later.", None, None),
    ("Obama met Putin in Moscow.", "Putin met Obama in Moscow.", None, None),
    ("e.g. use the exporter", "for example, use the exporter", None, None),
    ("**Note:** the  collector   runs", "Note: the collector runs", None, None),
    # The representative may say more than a paragraph it absorbs ...
    ("Keys rotate every 90 days.", "Keys rotate every 90 days; admins get 30.", None, None),
    # An acronym in the plural is the acronym; a currency sign does not change a number.
    ("List the APIs.", "List the API endpoints.", None, None),
    ("It costs $5.", "It costs 5 dollars.", None, None),
    ("The NYPD's campaign backfired.", "The NYPD campaign backfired.", None, None),
    # A hyphenated word is a word: SPEC's paraphrases say "cursor-based" for "cursor".
    ("Cursor-based pagination returns a next_cursor field that you pass to fetch the next "
     "page.", "Cursor pagination returns a next_cursor field that you pass to fetch the "
     "next page.", None, None),
    # A hyphenated number word is the number; "incoming" is "inbound"; a negation word inside
    # a hyphenated word negates nothing.
    ("It runs as a 4-stage pipeline.", "It runs as a four-stage pipeline.", None, None),
    # Tens joined to units are one number, "one" included.
    ("Run twenty-five replicas.", "Run 25 replicas.", None, None),
    ("Run twenty-one replicas.", "Run 21 replicas.", None, None),
    ("Incoming requests", "Inbound requests", "heading", None),
    # A word in capitals is the same word capitalised (an acronym is hashed that way).
    ("WARNING: keep a backup.", "Warning: keep a backup.", None, None),
    ("INSTALLATION", "Installation", "heading", None),
    ("Installation", "INSTALLATION", "heading", None),
    # An amount after "$" is a number, never a version ("1.0" alone would be one).
    ("Sold for $1.0 bn.", "Sold for $1.0 billion.", None, None),
    # White space and particles around the same terms of a caseless script.
    ("OpenTelemetry の前身です。 詳細については、歴史を参照してください。",
     "OpenTelemetry の前身です。詳細については、歴史 を参照してください。", None, "ja"),
    ("そして、以下を実装します。", "そして、以下のように実装します。", None, "ja"),
]


@pytest.mark.parametrize(("a", "b", "kind", "lang", "reason"), REFUSED)
def test_refused(a, b, kind, lang, reason):
    assert fact_conflict(a, b, segment_type=kind, language=lang) == reason


@pytest.mark.parametrize(("a", "b", "kind", "lang"), COVERED)
def test_covered(a, b, kind, lang):
    assert fact_conflict(a, b, segment_type=kind, language=lang) is None


def test_strict_types_need_equal_facts():
    # A paragraph may be absorbed by a representative that says more; a heading or code may not.
    assert fact_conflict("Run defrag", "Run defrag --all") is None
    assert fact_conflict("Run defrag", "Run defrag --all", segment_type="heading") == "identifier"
    assert fact_conflict("tool defrag", "tool defrag --all", segment_type="code") == "content"
    # Page furniture is deduplicated without the guard.
    assert fact_conflict("Page 3 of 9", "Page 4 of 9", segment_type="page_furniture") is None


def test_every_reason_is_documented():
    assert set(fact_tables.REASONS) == {"number", "date", "version", "identifier", "name",
                                        "opposite",
                              "negation", "content", "section"}
    for _, _, _, _, reason in REFUSED:
        assert reason in fact_tables.REASONS


def test_signature_column_type_and_determinism():
    texts = pl.Series(["Upgrade from 3.4 to 3.5", "", None, "plain words only", "--flag x"])
    sig = fact_signatures(texts)
    assert sig.name == "fact_signature"
    assert sig.dtype == pl.List(pl.UInt64)
    assert sig.to_list()[1] == [] and sig.to_list()[2] == []
    # Plain words state no fact, only content words (kind 8 and up).
    assert sig.to_list()[3] and all(h >> 60 >= 8 for h in sig.to_list()[3])
    assert sig.equals(fact_signatures(texts))
    # Sorted and unique per row; kinds in the top four bits.
    for row in sig.to_list():
        assert row == sorted(set(row))
        assert all((h >> 60) in range(15) for h in row)


def test_thread_count_does_not_change_signatures():
    rng = np.random.default_rng(3)
    words = ["the", "--flag", "3.5", "10,000", "GetResponse", "not", "Jaeger", "enable", "a_b"]
    texts = pl.Series([" ".join(rng.choice(words, 8)) for _ in range(20_000)])
    from arrowdedup.arrays.hashing import string_buffers

    offsets, data = string_buffers(texts.to_arrow())
    z = np.zeros(len(texts), dtype=bool)
    one = fact_scan.scan(offsets, data, z, z, z, *F._tables(), threads=1)
    two = fact_scan.scan(offsets, data, z, z, z, *F._tables(), threads=2)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])


def test_a_row_with_more_facts_than_the_buffer_holds():
    # The scanner keeps room for a row's worst case and resumes with grown buffers: a row
    # past the first capacity loses no fact, and the rows after it are read as usual.
    big = " ".join(f"{i}MB" for i in range(5_000))
    texts = pl.Series([big, "see Jaeger at 10:30", *(["port 8080"] * 3_000)])
    sig = fact_signatures(texts).to_list()
    assert len(sig[0]) == 5_000
    assert sig[1] == fact_signatures(pl.Series(["see Jaeger at 10:30"])).to_list()[0]
    assert sig[2] == sig[-1] == fact_signatures(pl.Series(["port 8080"])).to_list()[0]


def test_stored_signatures_are_read_in_order_or_sorted():
    sorted_col = pl.Series("fact_signature", [[1, 4], [], [2, 3, 9]], dtype=pl.List(pl.UInt64))
    offsets, values = F.signature_column_arrays(sorted_col.slice(1))
    assert offsets.tolist() == [0, 0, 3] and values.tolist() == [2, 3, 9]
    assert values.flags.writeable  # the kernels' compiled signatures take writable arrays
    unsorted = pl.Series("fact_signature", [[1, 4], [9, 2, 9, 3]], dtype=pl.List(pl.UInt64))
    offsets, values = F.signature_column_arrays(unsorted)
    assert offsets.tolist() == [0, 2, 5] and values.tolist() == [1, 4, 2, 3, 9]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(st.integers(0, 6), max_size=5), max_size=8),
       skip=st.integers(0, 2))
def test_the_numpy_order_check_reads_what_the_kernel_reads(rows, skip):
    """The NumPy check of stored signatures gives the kernel's CSR bit for bit, for rows in
    order (the check's copy) and out of order (the kernel's sort), sliced or not."""
    from arrowdedup.facts import conflict_jit as _facts_jit

    col = pl.Series("fact_signature", rows, dtype=pl.List(pl.UInt64)).slice(
        min(skip, len(rows)))
    offsets, values = F.signature_column_arrays(col)
    arr = col.to_arrow()
    raw = arr.offsets.to_numpy().astype(np.int64)
    want = _facts_jit._sorted_unique_csr.py_func(
        raw, np.ascontiguousarray(arr.values.to_numpy()[raw[0]:raw[-1]]))
    assert offsets.dtype == want[0].dtype and values.dtype == want[1].dtype
    assert offsets.tolist() == want[0].tolist() and values.tolist() == want[1].tolist()
    assert F.rows_sorted_unique(raw, arr.values.to_numpy()[raw[0]:raw[-1]]) == all(
        all(a < b for a, b in itertools.pairwise(r)) for r in rows[min(skip, len(rows)):])


def test_user_signature_column_is_read_and_sorted():
    col = pl.Series("fact_signature", [[5, 3, 3], None, []], dtype=pl.List(pl.UInt64))
    offsets, values = F.signature_column_arrays(col)
    assert offsets.tolist() == [0, 2, 2, 2]
    assert values.tolist() == [3, 5]
    with pytest.raises(SchemaError, match="fact_signature"):
        F.signature_column_arrays(pl.Series("fact_signature", ["x"]))


text_st = st.lists(
    st.sampled_from([*"abc XYZ019.,:-_/`'\"né不", "not ", " 3.5", "--f", "\n", "Jaeger "]),
    max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(a=text_st, kind=st.sampled_from([None, "paragraph", "heading", "code"]),
       lang=st.sampled_from([None, "en", "de", "fr", "zh"]))
def test_a_segment_covers_itself(a, kind, lang):
    assert fact_conflict(a, a, segment_type=kind, language=lang) is None


@settings(max_examples=150, deadline=None)
@given(a=text_st, extra=st.lists(st.sampled_from(["Port 8080.", "Uses --verbose.", "See GetX.",
                                                   "Call a_b."]), max_size=3))
def test_a_representative_may_say_more(a, extra):
    # Appended sentences add facts to the representative; they never refuse a paragraph.
    b = a + "\n" + " ".join(extra)
    assert fact_conflict(a, b, segment_type="paragraph") in (None, "name")


@settings(max_examples=150, deadline=None)
@given(words=st.lists(st.sampled_from(["data", "spans", "export", "the", "collector", "runs",
                                       "metrics"]), min_size=2, max_size=10),
       number=st.integers(0, 10_000), other=st.integers(0, 10_000))
def test_a_changed_number_is_refused_and_the_same_number_is_not(words, number, other):
    a = " ".join([*words, str(number)])
    b = " ".join([*words, str(other)])
    expected = None if number == other else "number"
    assert fact_conflict(a, b) == expected


def test_huge_and_hostile_texts():
    # Long inputs, malformed UTF-8 replacement characters, unbalanced quotes: no crash.
    texts = pl.Series(["`" * 10_000, '"' + "x" * 100, "a" * 2_000_000, "\ufffd" * 50, "9" * 500])
    sig = fact_signatures(texts)
    assert sig.len() == 5


def test_number_before_a_time_or_a_number_is_kept():
    # The number waiting for a unit word must survive a following number (found by the audit).
    assert fact_conflict("Item 21 16:30", "Item 20 16:30") == "number"
    assert fact_conflict("Guidelines supported: 1, 3", "Guidelines supported: 2, 3") == "number"
    assert fact_conflict("Tip #7 is here", "Tip #3 is here") == "number"
    assert fact_conflict("It uses ~26% of the CPU", "It uses ~25% of the CPU") == "number"


def test_title_case_headlines_have_no_names():
    assert fact_conflict("Chicago Shooting Shows Gap in Stepped-up Policing",
                         "Chicago shooting shows gap in stepped-up policing") is None
    # ... while a name in an ordinary sentence still counts (as a content word: rules 18.0).
    assert fact_conflict("The exporter sends spans to Jaeger.",
                         "The exporter sends spans to the backend.") == "content"


def test_more_opposites():
    assert fact_conflict("Stocks open lower", "Stocks close lower") == "opposite"
    assert fact_conflict("He was acquitted", "He was convicted") == "opposite"
    assert fact_conflict("The API for extraction:", "The API for injection:") == "opposite"
    assert fact_conflict("Encode the payload.", "Decode the payload.") == "opposite"
    assert fact_conflict("Execute the manually instrumented server",
                         "Execute the automatically instrumented server",
                         segment_type="heading") == "opposite"


def test_table_rows_are_records_each_cell_a_fact():
    # Rows of one table that differ in a cell value state different facts ...
    assert fact_conflict("Service: Shipping\nLanguage: Rust", "Service: Checkout\nLanguage: Go",
                         segment_type="table_row") == "identifier"
    assert fact_conflict("Pattern: DaemonSet\nUsable: Yes", "Pattern: DaemonSet\nUsable: Preferred",
                         segment_type="table_row") == "identifier"
    # ... a changed number is still reported as a number ...
    assert fact_conflict("clients: 1k\nmemory: 217MB", "clients: 2k\nmemory: 417MB",
                         segment_type="table_row") == "number"
    # ... while the same row with other spacing or case, or a representative row with a cell
    # more, covers it.
    assert fact_conflict("Service:  frontend\nLanguage: TypeScript",
                         "Service: Frontend\nLanguage:   TypeScript",
                         segment_type="table_row") is None
    assert fact_conflict("Service: Frontend", "Service: Frontend\nViews: yes",
                         segment_type="table_row") is None
    # The same lines in a paragraph are prose: lower-case words are not facts there, but
    # content words (rules 18.0), which the representative must cover.
    assert fact_conflict("Usable: yes", "Usable: preferred", segment_type="paragraph") == "content"
    assert fact_conflict("Usable: yes", "Usable: yes, preferred", segment_type="paragraph") is None


def test_code_terms_are_identifiers_as_if_backticked():
    texts = pl.Series(["run npm run fix:dict locally", "run npm run fix:format locally",
                       "run `npm run fix:dict` locally", "set ebpf here", "set ebpf here"])
    terms = pl.Series([["npm run fix:dict"], ["npm run fix:format"], None, ["ebpf"], None],
                      dtype=pl.List(pl.String))
    with_terms = fact_signatures(texts, code_terms=terms).to_list()
    plain = fact_signatures(texts).to_list()
    def facts(row: list[int]) -> list[int]:
        return [v for v in row if v >> 60 < 8]  # the facts, without the content words

    assert facts(plain[0]) == facts(plain[1])  # without the terms the commands state no fact
    assert facts(with_terms[0]) != facts(with_terms[1])
    assert with_terms[0] == with_terms[2] == plain[2]  # a term hashes as its backticked span
    assert set(plain[3]) < set(with_terms[3])
    # Rows without terms are unchanged, and the column stays sorted and unique.
    assert with_terms[4] == plain[4]
    assert all(row == sorted(set(row)) for row in with_terms)
    # A term longer than the scanner's backtick limit is prose, as in the text.
    long = "x" * (F.CODE_TERM_MAX_BYTES + 1)
    assert fact_signatures(pl.Series(["a"]), code_terms=pl.Series([[long]])).to_list() == \
        fact_signatures(pl.Series(["a"])).to_list()


def test_opposites_in_spanish_portuguese_and_french():
    """SPEC: the closed list holds in every language the project extracts. Pairs a merge
    audit of the Spanish docs found merged (ingress/egress, sync/async pipelines)."""
    assert fact_conflict("Pipeline de egreso de trazas", "Pipeline de ingreso de trazas",
                         segment_type="heading") == "opposite"
    assert fact_conflict("Crear instrumentos síncronos", "Crear instrumentos asíncronos",
                         segment_type="heading") == "opposite"
    assert fact_conflict("Usar o exportador assíncrono", "Usar o exportador síncrono") \
        == "opposite"
    assert fact_conflict("Le client envoie les données.", "Le serveur envoie les données.") \
        == "opposite"
    assert fact_conflict("El atributo es opcional.", "El atributo es obligatorio.") \
        == "opposite"
    assert fact_conflict("La API pública del SDK", "La API privada del SDK") == "opposite"
    assert fact_conflict("Configuration programmatique du SDK", "Configuration déclarative du SDK",
                         segment_type="heading") == "opposite"
    # A form of another language on the same side is the same fact.
    sig = fact_signatures(pl.Series(["ingress", "ingreso", "entrante", "egress", "sortant"]))
    rows = sig.to_list()
    assert rows[0] == rows[1] == rows[2] and rows[3] == rows[4] and rows[0] != rows[3]


def test_forms_that_are_english_words_stay_out_of_other_languages_lists():
    """Forms such as "exporter" or "superior" would make English text state an opposite it
    does not mean; they are left out, so English decisions do not move."""
    forms = {f for pair in fact_tables.OPPOSITES for side in pair for f in side.split()}
    assert not forms & {"exporter", "importer", "encoder", "installer", "lecture", "superior",
                        "inferior", "premier", "multiples", "descendant", "lee"}
    def facts(text: str) -> list[int]:
        return [v for v in fact_signatures(pl.Series([text])).to_list()[0] if v >> 60 < 8]

    assert facts("Configure the OTLP exporter.") == facts("Configure the OTLP receiver.")


def test_opposite_forms_are_unique():
    """A form in two pairs would silently belong to the last one only, and its antonym in
    the other pair would no longer contradict it."""
    forms = [f for pair in fact_tables.OPPOSITES for side in pair for f in side.split()]
    assert len(forms) == len(set(forms))


def test_wide_script_terms_are_identifiers_the_twin_agrees():
    """The caseless-script terms come out the same from the jitted scanner and its twin."""
    from arrowdedup.arrays.hashing import string_buffers
    from arrowdedup.jit import interpreted

    texts = ["トレースに使用するエクスポーター・レシーバー", "配置处理器不会启用它。",
             "로그 수집기를 비활성화합니다", "এটি সক্রিয় করুন", "GET the APIs for $5"] * 3
    series = pl.Series(texts, dtype=pl.String)
    offsets, data = string_buffers(series.to_arrow())
    n = len(texts)
    args = (offsets, data, np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool),
            *F._tables())
    jitted = fact_scan.scan(*args)
    with interpreted.quiet():
        twin = interpreted.twin("arrowdedup.facts.scan_jit").scan(*args)
    np.testing.assert_array_equal(jitted[0], twin[0])
    np.testing.assert_array_equal(jitted[1], twin[1])
    kinds = {fact_tables.KIND_NAMES[int(v) >> 60] for v in jitted[1]}
    assert "identifier" in kinds and "number" in kinds


def test_han_negations_read_through_are_the_listed_ones():
    """The term pairs read through exactly the one-character Han negations of the list (the
    scanner's own test cannot import the list into Numba code)."""
    from arrowdedup.jit import interpreted

    twin = interpreted.twin("arrowdedup.facts.scan_text_jit")
    listed = {w for w in fact_tables.CJK_NEGATIONS if len(w) == 1 and twin._wide_class(ord(w)) == 2}
    read_through = {chr(cp) for cp in range(0x3400, 0xA000) if twin._is_han_negation(cp)}
    assert read_through == listed

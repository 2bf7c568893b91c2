"""The fact guard's tables: the signature's layout (its kinds, their bits, the modes of the
segment types) and the words the scanner and the content rule read (units, number words,
months, opposites, negations), with the sizes up to which the interpreted twins run.
The rule itself is documented in :mod:`arrowdedup.facts.guard`."""

from __future__ import annotations

import numpy as np
import polars as pl

FACT_COLUMN = "fact_signature"
KIND_NAMES = ("mention", "number", "date", "version", "identifier", "name", "opposite",
              "negation", "content", "section")
MENTION, NUMBER, DATE, VERSION, IDENTIFIER, NAME, OPPOSITE, NEGATION = range(8)
CONTENT = 8  # the reason of a segment whose content its representative does not cover
# The further content kinds of :mod:`arrowdedup.facts.content` (its docstring says what each is).
ROLE, ORDER, LEAD, CODE_COMMAND, CODE_NOTE = 10, 11, 12, 13, 14
REASONS = KIND_NAMES[1:]  # what :func:`fact_conflict` may return
REASON_DTYPE = pl.Enum(list(REASONS))

# Per-row guard modes (int8), from the segment type.
SUBSET = np.int8(0)
EQUAL = np.int8(1)
OFF = np.int8(2)
CODE = np.int8(3)
STRICT_TYPES = frozenset({"heading", "title"})
CODE_TYPES = frozenset({"code"})
UNGUARDED_TYPES = frozenset({"page_furniture"})
MODE_OF = {**{t: int(EQUAL) for t in STRICT_TYPES}, **{t: int(CODE) for t in CODE_TYPES},
           **{t: int(OFF) for t in UNGUARDED_TYPES}}

# The top four bits of a signature value are its kind (KIND_NAMES, then the content kinds of
# :mod:`arrowdedup.facts.content`), the low 60 bits a hash.
LOW_BITS = np.uint64((1 << 60) - 1)
KIND_SHIFT = np.uint64(60)

# Languages that write a decimal comma and group thousands with dots (or spaces).
DECIMAL_COMMA = frozenset({"de", "fr", "es", "pt", "it", "nl", "pl", "ro", "uk", "ru", "cs",
                           "da", "sv", "nb", "fi", "tr", "id"})
# Languages that capitalise ordinary words (German nouns): capitalised words are not names.
CAPITALISED_NOUNS = frozenset({"de", "lb"})

UNITS = (
    "%", "kib", "mib", "gib", "tib", "kb", "mb", "gb", "tb", "pb", "kbps", "mbps", "gbps",
    "bytes", "byte", "bits", "bit", "ms", "µs", "us", "ns", "s", "sec", "secs", "second",
    "seconds", "min", "mins", "minute", "minutes", "h", "hr", "hrs", "hour", "hours", "d",
    "day", "days", "week", "weeks", "month", "months", "year", "years", "k", "m", "x", "px",
    "hz", "khz", "mhz", "ghz", "rps", "qps", "b", "°c", "°f", "mev", "kev", "ev", "kg", "g",
    "km", "cm", "mm", "tage", "tagen", "stunden", "minuten", "sekunden", "jahre", "jahren",
    "jours", "heures", "días", "dias", "horas", "minutos", "segundos",
)
UNIT_CANON = {
    "sec": "s", "secs": "s", "second": "s", "seconds": "s", "sekunden": "s", "segundos": "s",
    "mins": "min", "minute": "min", "minutes": "min", "minuten": "min", "minutos": "min",
    "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "stunden": "h", "heures": "h",
    "horas": "h", "day": "d", "days": "d", "tage": "d", "tagen": "d", "jours": "d", "días": "d",
    "dias": "d", "week": "w", "weeks": "w", "month": "mo", "months": "mo", "year": "y",
    "years": "y", "jahre": "y", "jahren": "y", "bytes": "b", "byte": "b", "bits": "bit",
}
NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
    "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
    "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100",
    "thousand": "1000", "zwei": "2", "drei": "3", "vier": "4", "fünf": "5", "sechs": "6",
    "sieben": "7", "acht": "8", "neun": "9", "zehn": "10", "zwölf": "12", "zwanzig": "20",
    "hundert": "100", "tausend": "1000",
}
# Month and weekday names (lower case) → canonical token. English "may" is left out: it is
# far more often the verb.
MONTHS = (
    ("january jan januar janvier enero janeiro styczeń ianuarie", "m01"),
    ("february feb februar février febrero fevereiro luty februarie", "m02"),
    ("march mar märz mars marzo março marzec martie", "m03"),
    ("april apr avril abril kwiecień aprilie", "m04"),
    ("mai mayo maio maj", "m05"),
    ("june jun juni juin junio junho czerwiec iunie", "m06"),
    ("july jul juli juillet julio julho lipiec iulie", "m07"),
    ("august aug août agosto sierpień", "m08"),
    ("september sep sept septembre septiembre setembro wrzesień septembrie", "m09"),
    ("october oct oktober octobre octubre outubro październik octombrie", "m10"),
    ("november nov novembre noviembre novembro listopad noiembrie", "m11"),
    ("december dec dezember décembre diciembre dezembro grudzień decembrie", "m12"),
    ("monday montag lundi lunes segunda-feira poniedziałek luni", "d1"),
    ("tuesday dienstag mardi martes terça-feira wtorek marți", "d2"),
    ("wednesday mittwoch mercredi miércoles quarta-feira środa miercuri", "d3"),
    ("thursday donnerstag jeudi jueves quinta-feira czwartek joi", "d4"),
    ("friday freitag vendredi viernes sexta-feira piątek vineri", "d5"),
    ("saturday samstag samedi sábado sobota sâmbătă", "d6"),
    ("sunday sonntag dimanche domingo niedziela duminică", "d7"),
)
DATE_WORDS = {w: canon for words, canon in MONTHS for w in words.split()}

# The closed list of opposites, as pairs of canonical words and their forms. A segment that
# says one side must be absorbed by a representative that says it too. SPEC asks for them in
# every language the project extracts: an English pair also lists its Spanish, Portuguese and
# French forms (added after a merge audit of the Spanish docs, rules 17.0; a pair's position
# is its fact value, so forms join existing pairs and new pairs go at the end). Forms that
# are also English words with another sense (exporter, installer, lecture, superior, ...)
# are left out, so that English text states nothing new.
OPPOSITES: tuple[tuple[str, str], ...] = (
    ("enable enables enabled enabling", "disable disables disabled disabling"),
    ("activate activates activated activating", "deactivate deactivates deactivated"),
    ("min minimum minimal", "max maximum maximal"),
    ("lower lowest", "upper uppermost higher highest"),
    ("before", "after"),
    ("grant grants granted granting", "revoke revokes revoked revoking"),
    ("lock locks locked locking", "unlock unlocks unlocked unlocking"),
    ("request requests", "response responses"),
    ("send sends sent sending", "receive receives received receiving"),
    ("add adds added adding", "remove removes removed removing"),
    ("start starts started starting", "stop stops stopped stopping"),
    ("allow allows allowed allowing permitir permite permitido permitida autoriser "
     "autorisé autorisée",
     "deny denies denied denying denegar deniega denegado denegada refuser refusé "
     "refusée"),
    ("accept accepts accepted accepting", "reject rejects rejected rejecting"),
    ("include includes included including incluir incluye incluido incluida inclui "
     "incluído incluída inclure inclus incluse",
     "exclude excludes excluded excluding excluir excluye excluido excluida exclui "
     "excluído excluída exclure exclu exclue"),
    ("increase increases increased increasing aumentar aumenta aumentado augmenter "
     "augmente augmenté",
     "decrease decreases decreased decreasing disminuir disminuye disminuido diminuir "
     "diminui diminuído diminuer diminue diminué"),
    ("inbound ingress incoming ingreso entrante entrantes",
     "outbound egress outgoing egreso saliente salientes sortant sortante sortants "
     "sortantes"),
    ("input inputs entrada entradas",
     "output outputs salida salidas saída saídas sortie sorties"),
    ("import imports imported importing importar importado importada importé",
     "export exports exported exporting exportar exporta exportado exportada exporté"),
    ("read reads reading leer lectura leitura",
     "write writes written writing escribir escribe escritura escrita écriture"),
    ("push pushes pushed pushing", "pull pulls pulled pulling"),
    ("encrypt encrypts encrypted encrypting cifrar cifrado chiffrer chiffré",
     "decrypt decrypts decrypted decrypting descifrar descifrado déchiffrer déchiffré"),
    ("compress compresses compressed comprimir comprimido comprimida compresser "
     "compressé",
     "decompress decompresses decompressed descomprimir descomprimido descomprimida "
     "décompresser décompressé"),
    ("success successful succeeded", "failure failed fails"),
    ("true verdadero verdadeiro vrai", "false falso faux"),
    ("small smaller smallest", "large larger largest"),
    ("sync synchronous synchronously síncrono síncrona síncronos síncronas sincrónico "
     "sincrónica sincrónicos sincrónicas synchrone synchrones",
     "async asynchronous asynchronously asíncrono asíncrona asíncronos asíncronas "
     "asincrónico asincrónica asincrónicos asincrónicas assíncrono assíncrona "
     "assíncronos assíncronas asynchrone asynchrones"),
    ("client clients cliente clientes", "server servers servidor servidores serveur serveurs"),
    ("public público pública públicos públicas publique publiques",
     "private privado privada privados privadas privé privée privés privées"),
    ("internal interno interna internos internas internes",
     "external externo externa externos externas externe externes"),
    ("upload uploads uploaded", "download downloads downloaded"),
    ("install installs installed installing instalar instalado instalada installé",
     "uninstall uninstalls uninstalled desinstalar desinstalado desinstalada "
     "désinstaller désinstallé"),
    ("connect connects connected conectar conectado conectada connecter connecté",
     "disconnect disconnects disconnected desconectar desconectado desconectada "
     "déconnecter déconnecté"),
    ("subscribe subscribes subscribed", "unsubscribe unsubscribes unsubscribed"),
    ("valid válido válida válidos válidas valide valides",
     "invalid inválido inválida inválidos inválidas invalide invalides"),
    ("required mandatory obligatorio obligatoria obrigatório obrigatória obligatoire",
     "optional opcional opcionales opcionais optionnel optionnelle"),
    ("ascending ascendente", "descending descendente"),
    ("inject injects injected injecting injection inyectar inyección injetar injeção injecter",
     "extract extracts extracted extracting extraction extraer extracción extrair "
     "extração extraire"),
    ("encode encodes encoded encoding codificar codificado codificada encodé",
     "decode decodes decoded decoding decodificar decodificado decodificada décoder "
     "décodé"),
    ("serialize serializes serialized serialization serializar serialización "
     "serialização sérialiser sérialisation",
     "deserialize deserializes deserialized deserialization deserializar "
     "deserialización desserializar desserialização désérialiser désérialisation"),
    ("attach attaches attached", "detach detaches detached"),
    ("mount mounts mounted", "unmount unmounts unmounted"),
    ("manual manually manualmente manuel manuelle manuellement",
     "automatic automatically automático automática automáticos automáticas "
     "automáticamente automaticamente automatique automatiquement"),
    ("open opens opened opening abrir abierto abierta aberto aberta ouvrir ouvert "
     "ouverte",
     "close closes closed closing cerrar cerrado cerrada fechar fechado fechada fermer "
     "fermé fermée"),
    ("acquit acquits acquitted", "convict convicts convicted"),
    ("win wins won winning", "lose loses lost losing"),
    ("rise rises rose rising", "fall falls fell falling"),
    ("permit permits permitted permitting", "forbid forbids forbidden forbidding prohibit "
     "prohibits prohibited prohibiting"),
    ("odd", "even"),
    ("static statically estático estática estáticos estáticas statique",
     "dynamic dynamically dinámico dinámica dinámicos dinámicas dinâmico dinâmica "
     "dinâmicos dinâmicas dynamique"),
    ("signed", "unsigned"),
    ("horizontal horizontally", "vertical vertically"),
    ("stateful", "stateless"),
    ("mutable mutável", "immutable inmutable imutável immuable"),
    ("blocking", "non-blocking nonblocking"),
    ("leader leaders", "follower followers"),
    ("parent parents padre padres",
     "child children hijo hijos hija hijas filho filhos filha filhas enfant enfants"),
    ("producer producers productor productores produtor produtores producteur "
     "producteurs",
     "consumer consumers consumidor consumidores consommateur consommateurs"),
    ("upstream", "downstream"),
    ("frontend front-end frontends", "backend back-end backends"),
    ("head", "tail"),
    ("cumulative", "delta"),
    ("explicit explicitly explícito explícita explícitamente explicitamente explicite",
     "implicit implicitly implícito implícita implícitamente implicitamente implicite"),
    ("global globally", "local locally"),
    ("absolute", "relative"),
    ("stable estable estables estável estáveis",
     "experimental unstable inestable inestables instável instáveis expérimental "
     "expérimentale"),
    ("first primero primera primeros primeras primeiro primeira première",
     "last último última últimos últimas dernier dernière"),
    ("more", "less fewer"),
    ("most", "least"),
    ("above", "below"),
    ("soft", "hard"),
    ("online", "offline"),
    ("get gets getting", "set sets setting"),
    ("oldest older old antiguo antigua antiguos antiguas antigo antiga ancien ancienne",
     "newest newer new nuevo nueva nuevos nuevas novo nova nouveau nouvelle"),
    ("aktivieren aktiviert aktiviere", "deaktivieren deaktiviert deaktiviere"),
    ("erlauben erlaubt", "verbieten verboten"),
    ("hinzufügen hinzugefügt", "entfernen entfernt"),
    ("anfrage anfragen", "antwort antworten"),
    ("senden sendet gesendet", "empfangen empfängt"),
    ("obere oberen", "untere unteren"),
    ("höher höhere", "niedriger niedrigere"),
    ("vorher", "nachher"),
    ("activer activé activée activés activées active", "désactiver désactivé désactivée "
     "désactivés désactivées désactive"),
    ("avant", "après"),
    ("ajouter ajouté", "supprimer supprimé"),
    ("requête requêtes", "réponse réponses"),
    ("habilitar habilitado habilitada habilitados habilitadas habilita",
     "deshabilitar deshabilitado deshabilitada deshabilitados deshabilitadas deshabilita "
     "desabilitar desabilitado desabilitada desabilitados desabilitadas desabilita"),
    # Spanish, Portuguese and Romanian share "activa".
    ("activar activado activada ativar ativado ativada activa ativa activat activată "
     "activează", "desactivar desactivado desactivada desativar desativado desativada "
     "desactiva desativa dezactiva dezactivat dezactivată dezactivate dezactivează"),
    ("abilitare abilitato abilitata abilitati abilita",
     "disabilitare disabilitato disabilitata disabilitati disabilita"),
    ("włączyć włączony włączona włączone włączenie włącz włącza",
     "wyłączyć wyłączony wyłączona wyłączone wyłączenie wyłącz wyłącza"),
    ("увімкнути увімкнено увімкнений увімкнена увімкніть",
     "вимкнути вимкнено вимкнений вимкнена вимкніть"),
    ("включить включено включен включена включите",
     "отключить отключено отключен отключена отключите выключить выключено"),
    ("antes", "después depois"),
    ("agregar añadir adicionar", "eliminar quitar"),
    ("solicitud solicitação requisição", "respuesta resposta"),
    ("enviado enviada", "recibido recibida recebido recebida"),
    ("mínimo", "máximo"),
    # Added after a merge audit; at the end, so the earlier pairs keep their fact values.
    ("single único única",
     "multiple múltiple múltiples múltiplo múltiplos múltiplas"),
    ("programmatic programmatically programático programática programáticamente "
     "programaticamente programmatique programmatiquement",
     "declarative declaratively declarativo declarativa declarativamente déclaratif "
     "déclarative déclarativement"),
    # Quantifiers (rules 20.0): "all jobs started" is not "some jobs started". Japanese and
    # Chinese forms are found inside a run without spaces (fact_scan._wide_words).
    ("all todos todas tous toutes すべて 全て 全部 所有",
     "some algunos algunas alguns algumas certains certaines 一部 部分 一些 有些"),
)
POLAR_WORDS: dict[str, str] = {
    form: side.split()[0] for pair in OPPOSITES for side in pair for form in side.split()
}
# Each form's (pair, side): an opposite fact is ``OPPOSITE << 60 | pair << 1 | side``, so its
# antonym is the same value with the last bit flipped.
POLAR_SIDES: dict[str, tuple[int, int]] = {
    form: (pair_id, side_id) for pair_id, pair in enumerate(OPPOSITES)
    for side_id, side in enumerate(pair) for form in side.split()
}

NEGATIONS = (
    # English ("n't" is matched as a suffix below)
    "not no non never cannot none nothing neither nor without nobody nowhere "
    # German
    "nicht kein keine keinen keinem keiner keines nie niemals nichts ohne "
    # French (ne … pas: either word)
    "ne pas jamais aucun aucune sans rien "
    # Spanish, Portuguese
    "nunca jamás ningún ninguna ninguno nada tampoco sin não nenhum nenhuma sem "
    # Polish, Romanian, Ukrainian
    "nie nigdy żaden żadna żadne bez nu niciodată niciun nicio fără не ні ніколи жоден немає "
    # Bengali
    "না নয় নেই"
).split()
CJK_NEGATIONS = ("不", "没", "沒", "未", "無", "无", "非", "别", "ない", "ません", "なし",
                  "않", "없", "못", "아니", "비활성", "비동기", "불가")



# The interpreted twins of the scanner and of the guard take inputs up to these sizes unless
# their jitted modules are already loaded (:func:`arrowdedup.jit.interpreted.module`): twin and
# kernel give the same bits (``tests/jit/test_interpreted.py``), so the choice is one of cost alone.
# Loading a jitted module costs ~0.6 s from a warm Numba cache (import Numba, load the machine
# code) and, from an empty one, its compilation: ~50 s of CPU for the scanner, a few seconds
# for the guard. The twin scans ~5 µs a byte of English text and ~14 µs a byte of CJK text
# (each byte of a character outside ASCII counts three times in a text's size, see
# :func:`scan_size`), and the guard sorts ~2.4 µs a value: so up to about a second of
# interpreted work. The bundled sample (45 KB of text) or twenty pages of docs stay on the
# twins and compile nothing.
TWIN_MAX_BYTES = 256 << 10
TWIN_MAX_FACTS = 64 << 10


# Snowball stemmers (PyStemmer) by list language; languages without one are not stemmed.
STEMMERS = {"en": "english", "es": "spanish", "pt": "portuguese", "fr": "french",
            "de": "german", "it": "italian", "nl": "dutch", "pl": "polish",
            "ro": "romanian", "ru": "russian"}


# True synonyms and spelling variants, folded to the first word of their group before
# stemming. Each group names words a reader takes for the same word in any context; words with
# a second common sense are left out.
SYNONYMS = """
need needs needed require requires required requirement requirements necessary essential
utilize utilise utilizes utilises utilized utilised employ
big large huge
every each
next following
begin begins began begun beginning start starts started starting
create creates created creating produce produces produced producing generate generates generated
billion bn
million mn
small little tiny
kid kids child children
woman women lady ladies
man men guy guys
photo photos picture pictures image images
bike bikes bicycle bicycles
plane planes airplane airplanes aeroplane aircraft
car cars automobile automobiles
jump jumps jumped jumping leap leaps leaped leaping
quit quits resign resigns resigned
hurt injured injures injure
fast quick rapid
buy buys bought purchase purchases purchased
choose chooses chose chosen select selects selected pick picks picked
modify modifies modified change changes changed alter alters altered
show shows showed shown display displays displayed
help helps helped assist assists assisted
app apps application applications
config configs configuration configurations
repo repos repository repositories
info information
docs doc documentation
env envs environment environments
dir dirs directory directories folder folders
param params parameter parameters
arg args argument arguments
auth authentication
db dbs database databases
spec specs specification specifications
k8s kubernetes
gray grey
color colour colors colours
center centre
behavior behaviour behaviors behaviours
license licence
""".strip().splitlines()


# Irregular English verb forms the stemmer cannot see, folded to the base form.
IRREGULAR = """
run ran
build built
write wrote written
make made
take took taken
go went gone
find found
give gave given
keep kept
leave left
hold held
begin began begun
know knew known
see saw seen
think thought
bring brought
buy bought
pay paid
say said
tell told
do did done
mean meant
spend spent
lead led
feel felt
meet met
understand understood
become became
grow grew grown
draw drew drawn
""".strip().splitlines()


SYNONYM_OF = {w: group.split()[0] for group in (*SYNONYMS, *IRREGULAR) for w in group.split()}


# Order words: a relation whose two sides may not swap.
ORDER_WORDS = {"over": "over", "than": "than", "instead": "instead", "vs": "vs",
               "versus": "vs", "→": "→", "->": "→", "=>": "→", "⇒": "→", "⟶": "→"}

"""Function words per language: the words that carry no content of their own, so that the
content-coverage rule (:mod:`arrowdedup.facts.content`) neither asks a representative to state
them nor counts them as a difference.

A word is a function word here when leaving it out changes no answer a reader could want:
articles, pronouns, auxiliaries and most prepositions and conjunctions, and empty filler.
Empty filler counts with them: adverbs that hedge (``basically``, ``simply``) and nouns that
name nothing in particular (``thing``, ``way``, ``system``: "ML systems need data" says what
"ML needs data" says).

Words that stopword lists usually drop but that carry meaning in technical text are NOT function
words: quantifiers (``all``, ``one``, ``each``, ``some``, ``none``), modal verbs of obligation
(``must``, ``should``), ``only``, and the order words the rule watches (``over``, ``than``).
Negations (``not``, ``without``) and the closed list of opposites (``before``, ``after``) are
facts of their own (:mod:`arrowdedup.facts.guard`), so they are listed here only to keep them out of
the content words.

The languages are those the project extracts (the shared corpus's and the shared pair sets'):
English, Spanish, Portuguese, French, German, Italian, Dutch, Polish, Romanian, Russian and
Ukrainian. Scripts without case (Han, kana, Hangul, Bengali, Devanagari, ...) have no list:
their terms are facts of the scanner (``identifier``).
"""

from __future__ import annotations

_EN = """
a an the this that these those there here it its they them their theirs we us our ours you your
yours he him his she her hers i me my mine myself itself themselves yourself yourselves ourselves
himself herself is are was were be been being am do does did doing done have has had having will
would can could may might shall of in on at by for from with to into onto about as so such and or
but if because while when where which who whom whose what how why also just very really quite
rather too either etc via per up out off under again further once own same other another whether
though although however thus therefore hence yet still even let lets using use used uses usually
simply basically actually generally typically please note within across along around through
toward towards upon like unlike get gets getting got s t ll ve re d m e g eg ie i.e e.g vs
then now well often sometimes mostly already ever here's there's it's that's what's let's
system systems thing things way ways kind kinds sort stuff based
"""

_ES = """
el la los las lo un una unos unas este esta estos estas ese esa esos esas aquel aquella ello
ellos ellas él ella nosotros nosotras vosotros usted ustedes yo tú te se le les me nos os mi mis
tu tus su sus nuestro nuestra nuestros nuestras es son era eran fue fueron ser sido siendo está
están estaba estar estado hay ha han había haber he has hemos puede puedes pueden podemos podría
poder de del a
al en por para con sobre entre hasta desde hacia según mediante y e o u pero sino si porque como
cuando donde que quien quienes cual cuales cuyo también muy más ya aún así luego entonces
además aunque mientras cada vez algo mismo misma mismos mismas otro otra otros otras
usar usa usando uso
"""

_PT = """
o a os as um uma uns umas este esta estes estas esse essa esses essas isso isto aquele aquela
ele ela eles elas nós vós você vocês eu tu se lhe lhes me nos te meu minha meus minhas teu tua
seu sua seus suas nosso nossa nossos nossas é são era eram foi foram ser sido sendo está estão
estava estar estado há tem têm tinha ter pode podem podemos poderia poder de do da dos das em no na
nos
nas num numa por pelo pela pelos pelas para com sobre entre até desde segundo e ou mas porém se
porque como quando onde que quem qual quais cujo também muito mais já ainda assim então além
embora enquanto cada vez algo mesmo mesma mesmos mesmas outro outra outros outras ao aos à às
usar usa usando uso
"""

_FR = """
le la les l un une des du de d au aux ce cet cette ces celui celle ceux celles il ils elle elles
on nous vous je tu me te se lui leur leurs mon ma mes ton ta tes son sa ses notre nos votre vos
est sont était étaient été être ai a as avons avez ont avait avoir fait faire peut peux pouvez
pouvons peuvent pourriez
pourrait pouvoir en dans par pour avec sur sous entre vers chez depuis selon et ou mais donc or
car si comme quand où que qu qui quoi dont lequel laquelle lesquels aussi très plus déjà encore
ainsi alors puis cependant bien tout toute tous toutes chaque fois même mêmes autre autres y c
s n j m t ça cela ceci utiliser utilise utilisant
"""

_DE = """
der die das den dem des ein eine einen einem einer eines dieser diese dieses diesen diesem jener
es er sie wir ihr ich du mich dich sich ihm ihn ihnen uns euch mein meine sein seine ihre unser
euer ist sind war waren sein gewesen bin bist seid wird werden wurde wurden worden hat haben
hatte hatten kann kannst können könnt könnte darf von vom zu zum zur in im an am auf aus bei mit
nach seit
über unter um durch für gegen zwischen und oder aber denn sondern wenn weil als wie wo was wer
welche welcher welches dass ob auch sehr schon noch so dann also jedoch doch ja hier
dort dabei dazu damit davon daher
"""

_IT = """
il lo la i gli le un uno una questo questa questi queste quello quella quelli quelle esso essa
essi esse lui lei noi voi loro io tu mi ti si ci vi gli ne mio mia miei mie tuo tua suo sua suoi
sue nostro nostra è sono era erano stato stata essere ha hanno aveva avere può puoi possono potrebbe
potere
di del della dei delle dello degli a al alla ai alle da dal dalla in nel nella nei nelle su sul
sulla per con tra fra e ed o ma se perché come quando dove che chi quale quali cui anche molto
più già ancora così allora poi però ogni stesso stessa altro altra altri altre
"""

_NL = """
de het een deze dit die dat zij ze hij wij we jij je u ik mij me hem haar ons hun mijn zijn uw
onze is zijn was waren geweest ben bent wordt worden werd werden heeft hebben had hadden kan
kunnen kon van in op aan bij met naar voor door over uit tot om tegen tussen en of maar want als
wanneer waar wat wie welke dat ook zeer al nog zo dan dus echter toch er hier daar
"""

_PL = """
i w we z ze na do od o u za przez przy dla po pod nad przed a ale lub albo czy że to ten ta te
tego tej tym ci jest są był była było były być będzie mogą może można jak gdy gdzie który która
które którzy co kto się jego jej ich go mu jej nam wam mnie ci także też bardzo już jeszcze tak
więc jednak oraz jako każdy
"""

_RO = """
și sau dar iar de la în pe cu din prin pentru despre către după sub între un o niște unui unei
unor cel cea cei cele acest această aceste acești acel acea el ea ei ele noi voi eu tu mă te se
îi îl le ne vă al a ai ale lui este sunt era erau fost fi are au avea poate pot putea ca că
când unde care ce cine cum dacă foarte mai deja încă așa deci însă fiecare
"""

_RU = """
и в во на с со к ко по о об от до из у за над под при для через между а но или либо что чтобы
как когда где который которая которое которые кто это этот эта эти тот та те то он она оно они
мы вы я ты его её их ему ей им мне нам вам себя свой своя своё свои есть был была было были быть
будет может могут также тоже очень уже ещё так поэтому однако каждый
"""

_UK = """
і й та в у на з із зі до від по про за над під при для через між а але або чи що щоб як коли
де який яка яке які хто це цей ця ці той та те то він вона воно вони ми ви я ти його її їх йому
їй їм мені нам вам себе свій своя своє свої є був була було були бути буде може можуть також
дуже вже ще так тому однак кожен
"""

BY_LANGUAGE: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in (("en", _EN), ("es", _ES), ("pt", _PT), ("fr", _FR), ("de", _DE),
                        ("it", _IT), ("nl", _NL), ("pl", _PL), ("ro", _RO), ("ru", _RU),
                        ("uk", _UK))
}
DEFAULT_LANGUAGE = "en"


def language_key(tag: str | None) -> str:
    """The list a BCP-47 tag uses: its primary subtag when listed, else English."""
    if not tag:
        return DEFAULT_LANGUAGE
    primary = tag.split("-")[0].split("_")[0].lower()
    return primary if primary in BY_LANGUAGE else DEFAULT_LANGUAGE

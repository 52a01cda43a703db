"""What an exit code or a signal says about a failure, when nothing else does.

A process killed by SIGKILL (exit 137, torchrun's `exitcode: -9`, srun's `task 0:
Killed`) was most often killed by the host's OOM killer, or by the scheduler enforcing a
limit; SIGBUS (135) in a training job is usually /dev/shm running out; SIGABRT (134)
and SIGSEGV (139) are the program's own crash; SIGTERM and SIGINT are someone stopping
it. These readings are weak evidence: any message naming the failure beats them, and a
diagnosis made from them alone says it is inferred.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Meaning:
    signal: int
    name: str
    code: str
    inference: str
    source: str


MEANINGS = {
    9: Meaning(9, "SIGKILL", "OOM_HOST",
               "killed by SIGKILL: usually the host's OOM killer, or the scheduler enforcing a limit",
               "torvalds/linux mm/oom_kill.c (the OOM killer sends SIGKILL)"),
    7: Meaning(7, "SIGBUS", "SHM",
               "killed by SIGBUS: usually shared memory (/dev/shm) running out",
               "pytorch/pytorch torch/utils/data/_utils/signal_handling.py"),
    6: Meaning(6, "SIGABRT", "USER_ERROR", "aborted (SIGABRT) by the program or a library it uses",
               "libstdc++ std::terminate -> abort()"),
    11: Meaning(11, "SIGSEGV", "USER_ERROR", "crashed with a segmentation fault (SIGSEGV)",
                "POSIX signal(7)"),
    4: Meaning(4, "SIGILL", "USER_ERROR", "crashed on an illegal instruction (SIGILL)", "POSIX signal(7)"),
    8: Meaning(8, "SIGFPE", "USER_ERROR", "crashed on an arithmetic error (SIGFPE)", "POSIX signal(7)"),
    15: Meaning(15, "SIGTERM", "CANCELLED", "stopped by SIGTERM", "POSIX signal(7)"),
    2: Meaning(2, "SIGINT", "CANCELLED", "interrupted (SIGINT)", "POSIX signal(7)"),
    1: Meaning(1, "SIGHUP", "CANCELLED", "stopped by SIGHUP", "POSIX signal(7)"),
}  # fmt: skip
EXIT = Meaning(0, "", "USER_ERROR", "exited with an error", "the program's exit status")
_BY_NAME = {m.name: m.signal for m in MEANINGS.values()}
# strsignal(3) words, as srun and shells print them.
_WORDS = {
    "killed": 9,
    "bus error": 7,
    "aborted": 6,
    "segmentation fault": 11,
    "terminated": 15,
    "interrupt": 2,
    "hangup": 1,
    "illegal instruction": 4,
    "floating point exception": 8,
}
# The same words in the languages glibc translates strsignal(3) to (its libc.mo
# catalogs, read with gettext): a shell on a node with LANG=zh_CN.UTF-8 prints 已杀死 where
# an English one prints Killed. Only the three a training job's end says most often;
# "Terminated" and "Aborted" translate to words ordinary output uses too.
_TRANSLATED: dict[int, tuple[str, ...]] = {
    9: (
        'Buĉita',
        'Bị buộc kết thúc',
        'Drept',
        'Dræbt',
        'Dödad',
        'Getötet',
        'Geëlimineerd',
        'Kilőve',
        'Matado',
        'Matat',
        'Morto',
        'Nutraukta (killed)',
        'Pobit',
        'Processus arrêté',
        'Süreç durduruldu',
        'Tapettu',
        'Terbunuh',
        'Terminado (killed)',
        'Ubijen',
        'Ucciso',
        'Unicestwiony',
        'Zabit (SIGKILL)',
        'Zabitý',
        'Σκοτώθηκε',
        'Безусловно прекъснат',
        'Вбито',
        'Забіты',
        'Убито',
        'Убијен',
        '已杀死',
        '強制終了',
        '強制結束',
        '죽었음',
    ),
    7: (
        'Bus-eraro',
        'Bus-Zugriffsfehler',
        'Busfejl',
        'Busfout',
        'Bussfeil',
        'Bussfel',
        'Busz hiba',
        'Błąd szyny',
        'Chyba na sběrnici (neplatná adresa) (SIGBUS)',
        'Chyba na zbernici',
        'Erreur du bus',
        'Erro de bus',
        'Erro no barramento',
        'Erro no bus de datos',
        'Error de bus',
        'Error del bus',
        'Errore di bus',
        'Lỗi bus',
        'Magistralės klaida',
        'Napaka vodila',
        'Sabirnička greška',
        'Veri yolu hatası',
        'Väylävirhe',
        'Σφάλμα στον δίαυλο(bus)',
        'Грешка на адресната шина',
        'Грешка сабирнице',
        'Ошибка шины',
        'Памылка шыны',
        'Помилка каналу обміну даними',
        'バスエラー',
        '匯流排錯誤',
        '总线错误',
        '버스 오류',
    ),
    11: (
        'Adres-eraro',
        'Chyba segmentácie',
        'Erreur de segmentation',
        'Errore di segmentazione',
        'Falha de segmentação',
        'Fallo de segmento',
        'Falta de segmentação',
        'Kerusakan segmentasi',
        'Lỗi phân đoạn',
        'Minnesegmentsfeil',
        'Muistialueen ylitys',
        'Napaka segmentacije',
        'Naruszenie ochrony pamięci',
        'Neoprávněný přístup do paměti (SIGSEGV)',
        'Parçalama arızası',
        'Segmentacijska greška',
        'Segmentatiefout',
        'Segmentavimo klaida',
        'Segmenteringsfel',
        'Segmentfejl',
        'Speicherzugriffsfehler',
        'Szegmentálási hiba',
        'Violació de segment',
        'Violación de segmento',
        'Σφάλμα κατάτμησης (segmentation fault)',
        'Збой сэгмэнтацыі',
        'Нарушение на разделянето(segfault)',
        'Неуспех сегментације',
        'Ошибка сегментирования',
        'Помилка адресування',
        '段错误',
        '程式記憶體區段錯誤',
        '세그멘테이션 오류',
    ),
}  # fmt: skip
_WORDS.update({word.lower(): signal for signal, words in _TRANSLATED.items() for word in words})

_SIGNAL_PATTERNS = [
    re.compile(r"\bexitcode\s*:\s*-(\d+)"),  # torchrun's summary: a negative exit code is a signal
    re.compile(r"\bSignal (\d+) \(SIG\w+\)"),  # torchrun: "Signal 6 (SIGABRT) received by PID"
    re.compile(r"(?:got|received|by|with) signal:? ?(\d+)\b", re.IGNORECASE),
    re.compile(r"ExitCode=\d+:([1-9]\d*)\b"),  # sacct/scontrol: exit status:signal
    re.compile(r"interrupted by signal (\d+)"),
]
_NAME = re.compile(r"\b(SIGKILL|SIGBUS|SIGABRT|SIGSEGV|SIGILL|SIGFPE|SIGTERM|SIGINT|SIGHUP)\b")
_WORD = re.compile(
    r"(?:task \d+: |^|signal: |\] |\s\d+ )(Killed|Bus error|Aborted|Segmentation fault|Terminated"
    r"|Illegal instruction|Floating point exception|"
    + "|".join(re.escape(word) for words in _TRANSLATED.values() for word in words)
    + r")(?: \(core dumped\))?(?:$|\.|\s)",
    re.IGNORECASE,
)
_EXIT = re.compile(
    r"(?:exit(?:ed)?(?: with)?(?: exit)? (?:code|status)|exit_?code|return ?code|returncode|"
    r"Exit Code|ExitCode=)[\s:=]*(-?\d+)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Reading:
    meaning: Meaning
    exit_code: int | None

    @property
    def code(self) -> str:
        return self.meaning.code

    def describe(self) -> str:
        if self.meaning is EXIT:
            return f"exit code {self.exit_code}"
        if self.exit_code is not None and self.exit_code > 128:
            return f"{self.meaning.name}, exit code {self.exit_code}"
        return self.meaning.name


# Words every pattern below needs one of: most lines hold none and are skipped at once.
_WORDS_NEEDED = (
    "exit", "sig", "kill", "bus error", "abort", "segmentation", "terminated",
    "illegal instruction", "floating point", "code", *(w.lower() for ws in _TRANSLATED.values() for w in ws),
)  # fmt: skip


def read(text: str) -> Reading | None:
    """The signal or exit status a log line reports, if any."""
    lower = text.lower()
    if not any(word in lower for word in _WORDS_NEEDED):
        return None
    for pattern in _SIGNAL_PATTERNS:
        match = pattern.search(text)
        if match and int(match.group(1)) in MEANINGS:
            return Reading(MEANINGS[int(match.group(1))], None)
    match = _NAME.search(text)
    if match:
        return Reading(MEANINGS[_BY_NAME[match.group(1)]], None)
    match = _WORD.search(text)
    if match:
        return Reading(MEANINGS[_WORDS[match.group(1).lower()]], None)
    match = _EXIT.search(text)
    if match:
        return from_exit(int(match.group(1)))
    return None


def from_exit(code: int | None) -> Reading | None:
    """An exit status: 128+N is signal N (a shell's, srun's, Kubernetes' convention)."""
    if code is None or code == 0:
        return None
    if code < 0 and -code in MEANINGS:
        return Reading(MEANINGS[-code], code)
    if code > 128 and code - 128 in MEANINGS:
        return Reading(MEANINGS[code - 128], code)
    return Reading(EXIT, code)

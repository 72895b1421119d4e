"""PII evaluation on real technical text: false masks per 5,000 documents of
this machine's documentation (bench/real_text_corpus.py) and recall on PII
planted into that text at known offsets, for luminamoon's PIIMasker and the
PII rules of datatrove and scrubadub (PyPI), side by side in one run.

    python bench/pii_eval.py [--real-docs 5000] [--planted-docs 3000] [--review masks.txt] [--json out.json]

Planted set: every type and every supported form (see FORMS), each value in a
realistic sentence inserted as a paragraph of a real document; a value is
found when a mask of its type covers it (at most 2 extra bytes either side).
False masks: every mask on the unplanted real text, less those an oracle
judges to be real PII of that type. The oracle, written here independently of
the masker and deliberately generous to every engine:
  - e-mail: real unless it is a Message-ID (a header word such as Message-ID,
    In-Reply-To, References or msgid on the line before it, a mid:/news: URL,
    a mail.gmail.com domain, or a local part of a message id's shape: 8+
    digits then '.' or '-', git-send-email, Gnus' .fsf, qmail's)
    or a Python decorator (`@name.attr` with no local part letter);
  - IP: real when Python's ipaddress parses it and, for IPv4, the 300
    characters around it say network (ip, address, host, server, dns,
    netmask, gateway, subnet, route, ping, localhost, inet, listen, bind,
    proxy, nameserver, connect, port, network), for IPv6, it has "::" or a
    hex letter (versions have neither);
  - phone: real when the 300 characters around it say phone, tel, fax,
    call, mobile or dial;
  - secret: real (the patterns are exact token formats);
  - credit card, SSN, IBAN: never (no such values in package documentation;
    --review lists every mask for a human to check).
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import real_text_corpus  # noqa: E402

TYPES = ["email", "ip_address", "phone", "credit_card", "ssn", "iban", "secret"]

# --- planted PII -------------------------------------------------------------------------------

FIRST = ["john", "maria", "wei", "fatima", "olga", "jose", "anna", "li", "kwame", "sven", "priya", "tomas"]
LAST = ["smith", "garcia", "chen", "haddad", "ivanova", "silva", "kowalski", "nguyen", "mensah", "berg"]
DOMAINS = ["example.com", "mail.example.org", "uni-heidelberg.de", "company.co.uk", "posteo.net", "gmx.at",
           "example.xn--p1ai", "startup.io", "isp.com.br", "research.ac.jp"]


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def _iban(country: str, bban_len: int, rng: random.Random, letters: int = 0) -> str:
    bban = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(letters)) + \
        "".join(rng.choice("0123456789") for _ in range(bban_len - letters))
    num = int("".join(str(int(c, 36)) for c in bban + country + "00"))
    return f"{country}{98 - num % 97:02d}{bban}"


def _grouped(s: str, sep: str, sizes=None) -> str:
    if sizes is None:
        return sep.join(s[i:i + 4] for i in range(0, len(s), 4))
    out, i = [], 0
    for n in sizes:
        out.append(s[i:i + n])
        i += n
    return sep.join(out)


def _public_ipv4(rng: random.Random) -> str:
    while True:
        ip = ipaddress.IPv4Address(rng.getrandbits(32))
        if ip.is_global and not ip.is_multicast:
            return str(ip)


def _ipv6(rng: random.Random) -> str:
    return str(ipaddress.IPv6Address((0x2001 << 112) | (0x0db8 << 96) | rng.getrandbits(64)))


def _nanp(rng: random.Random) -> tuple[str, str, str]:
    return str(rng.randint(201, 989)), str(rng.randint(200, 999)), f"{rng.randint(0, 9999):04d}"


FORMS = {
    "email": {
        "plain": lambda r: f"{r.choice(FIRST)}.{r.choice(LAST)}@{r.choice(DOMAINS)}",
        "tagged": lambda r: f"{r.choice(FIRST)}+{r.choice(['lists', 'dev', 'x1'])}@{r.choice(DOMAINS)}",
        "digits": lambda r: f"{r.choice(FIRST)}{r.randint(1, 99)}@{r.choice(DOMAINS)}",
        "punycode": lambda r: f"{r.choice(FIRST)}@{r.choice(LAST)}.xn--p1ai",
    },
    "ip_address": {
        "ipv4": _public_ipv4,
        "ipv6": _ipv6,
        "ipv6_compressed": lambda r: f"2001:db8::{r.randint(1, 0xffff):x}",
        "ipv4_mapped": lambda r: f"::ffff:{_public_ipv4(r)}",
        "ipv4_compatible": lambda r: f"::{_public_ipv4(r)}",
    },
    "phone": {
        "nanp_parens": lambda r: "({}) {}-{}".format(*_nanp(r)),
        "nanp_dashes": lambda r: "{}-{}-{}".format(*_nanp(r)),
        "nanp_dots": lambda r: "{}.{}.{}".format(*_nanp(r)),
        "nanp_plus1": lambda r: "+1 {} {} {}".format(*_nanp(r)),
        "nanp_1dash": lambda r: "1-{}-{}-{}".format(*_nanp(r)),
        "e164_uk": lambda r: f"+44 20 {r.randint(7000, 8999)} {r.randint(0, 9999):04d}",
        "e164_de": lambda r: f"+49 30 {r.randint(100000, 999999)}",
        "e164_fr": lambda r: "+33 1 " + " ".join(f"{r.randint(0, 99):02d}" for _ in range(4)),
        "e164_jp": lambda r: f"+81-3-{r.randint(1000, 9999)}-{r.randint(1000, 9999)}",
        "e164_compact": lambda r: f"+4420{r.randint(70000000, 89999999)}",
    },
    "credit_card": {
        "visa": lambda r: _grouped(_luhn_complete("4", 16, r), " "),
        "visa_dashes": lambda r: _grouped(_luhn_complete("4", 16, r), "-"),
        "mastercard": lambda r: _luhn_complete(str(r.randint(51, 55)), 16, r),
        "mastercard_2series": lambda r: _grouped(_luhn_complete(str(r.randint(2221, 2720)), 16, r), " "),
        "amex": lambda r: _grouped(_luhn_complete(r.choice(["34", "37"]), 15, r), " ", (4, 6, 5)),
        "discover": lambda r: _grouped(_luhn_complete("6011", 16, r), " "),
        "jcb": lambda r: _luhn_complete(str(r.randint(3528, 3589)), 16, r),
        "diners": lambda r: _grouped(_luhn_complete("36", 14, r), " ", (4, 6, 4)),
    },
    "ssn": {
        "dashes": lambda r: f"{r.choice([r.randint(1, 665), r.randint(667, 899)]):03d}-{r.randint(1, 99):02d}-{r.randint(1, 9999):04d}",
        "spaces": lambda r: f"{r.randint(1, 665):03d} {r.randint(1, 99):02d} {r.randint(1, 9999):04d}",
        "dots": lambda r: f"{r.randint(667, 899):03d}.{r.randint(1, 99):02d}.{r.randint(1, 9999):04d}",
    },
    "iban": {
        "de_compact": lambda r: _iban("DE", 18, r),
        "de_spaced": lambda r: _grouped(_iban("DE", 18, r), " "),
        "gb_spaced": lambda r: _grouped(_iban("GB", 18, r, letters=4), " "),
        "fr_spaced": lambda r: _grouped(_iban("FR", 23, r), " "),
        "ly_spaced": lambda r: _grouped(_iban("LY", 21, r), " "),
        "nl_dashes": lambda r: _grouped(_iban("NL", 14, r, letters=4), "-"),
        "ch_compact": lambda r: _iban("CH", 17, r),
    },
    "secret": {
        "aws": lambda r: "AKIA" + "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16)),
        "github": lambda r: "ghp_" + "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789") for _ in range(36)),
        "gitlab": lambda r: "glpat-" + "".join(r.choice("abcdefghijklmnopqrstuvwxyz0123456789_-") for _ in range(20)),
        "slack": lambda r: f"xoxb-{r.randint(10**11, 10**12)}-{r.randint(10**12, 10**13)}-" +
                           "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEF") for _ in range(24)),
        "pem": lambda r: "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" +
                         "".join(r.choice("abcdefABCDEF0123456789+/") for _ in range(48)) + "\n-----END RSA PRIVATE KEY-----",
    },
}

SENTENCES = {
    "email": ["Please send bug reports to {v} rather than to the list.", "Contact: {v}",
              "Patch by the maintainer ({v}), reviewed upstream.", "You can reach me at <{v}>."],
    "ip_address": ["The build server at {v} was unreachable for two days.", "Connect to {v} on port 8080.",
                   "Requests from {v} were rejected by the firewall.", "host = {v}"],
    "phone": ["For support call {v} during office hours.", "Phone: {v}", "Tel. {v} (mornings only)",
              "You can also reach the office at {v}."],
    "credit_card": ["The test payment used card {v} and was refused.", "Card number: {v}",
                    "I paid with {v}, please refund."],
    "ssn": ["Her social security number is {v}.", "SSN: {v}", "The form listed {v} as the SSN."],
    "iban": ["Donations can be sent to {v} (account holder: the project).", "IBAN: {v}",
             "Transfer the fee to {v} before the deadline."],
    "secret": ["Do not commit keys such as {v} to the repository.", "token = {v}", "The leaked credential was {v}."],
}


def planted(real_docs: list[str], n: int, seed: int = 42) -> list[tuple[str, int, int, str, str]]:
    """n documents, each a real one with one planted value: (text, begin, end,
    type, form), offsets in characters. Types and forms cycle, so each form
    gets about n / (number of forms) values."""
    rng = random.Random(seed)
    forms = [(t, f) for t in TYPES for f in FORMS[t]]
    out = []
    for i in range(n):
        kind, form = forms[i % len(forms)]
        value = FORMS[kind][form](rng)
        sentence = rng.choice(SENTENCES[kind])
        doc = real_docs[rng.randrange(len(real_docs))]
        cuts = [m.end() for m in re.finditer(r"\n\n", doc)] or [len(doc)]
        at = rng.choice(cuts)
        head = doc[:at] if doc[:at].endswith("\n\n") or at == 0 else doc[:at] + "\n\n"
        begin = len(head) + sentence.index("{v}")
        text = head + sentence.replace("{v}", value) + "\n\n" + doc[at:]
        out.append((text, begin, begin + len(value), kind, form))
    return out


# --- the engines: (begin, end, type) in characters per document -----------------------------------


def luminamoon_engine():
    from luminamoon import _native

    masker = _native._PiiMasker(None, False)

    def run(texts):
        out = []
        for t in texts:
            b = t.encode()
            spans = masker.find(b)
            if spans and not t.isascii():
                out.append([(len(b[:s].decode()), len(b[:e].decode()), k) for s, e, k in spans])
            else:
                out.append([(s, e, k) for s, e, k in spans])
        return out
    return run


def datatrove_engine():
    from datatrove.pipeline.formatters.pii import PIIFormatter

    f = PIIFormatter()  # its defaults: e-mail, public IPv4 only

    def run(texts):
        out = []
        for t in texts:
            spans = [(m.start(), m.end(), "email") for m in f.emails_replacer.regex.finditer(t)]
            spans += [(m.start(), m.end(), "ip_address") for m in f.ip_replacer.regex.finditer(t)
                      if f.ip_replacer.validator(m.group(0))]
            out.append(spans)
        return out
    return run


def scrubadub_engine():
    import scrubadub

    scrubber = scrubadub.Scrubber(locale="en_US")
    names = {"email": "email", "phone": "phone", "credit_card": "credit_card", "social_security_number": "ssn",
             "credential": "secret"}

    def run(texts):
        return [[(f.beg, f.end, names[f.type]) for f in scrubber.iter_filth(t) if f.type in names] for t in texts]
    return run


ENGINES = {"luminamoon": (luminamoon_engine, set(TYPES)),
           "datatrove": (datatrove_engine, {"email", "ip_address"}),
           "scrubadub": (scrubadub_engine, {"email", "phone", "credit_card", "ssn", "secret"})}

# --- the oracle ----------------------------------------------------------------------------------

_MSGID_CONTEXT = re.compile(r"(?i:message-?id|in-reply-to|references:|msgid)|(?<![A-Za-z])(?:mid|news):")
_MSGID_LOCAL = re.compile(r"^\d{8,}[.\-]|git-send-email|\.fsf$|^\d+\.\d+\.qmail$")
_NET_WORDS = re.compile(r"\b(ip|ips|ipv4|ipv6|address|addresses|addr|host|hosts|server|dns|netmask|gateway|subnet|"
                        r"route|ping|localhost|inet|listen|bind|proxy|nameserver|connect|port|network)\b", re.I)
_PHONE_WORDS = re.compile(r"phone|\btel\b|\bfax\b|\bcall\b|mobile|\bdial", re.I)


def _line(text: str, b: int, e: int) -> tuple[str, str]:
    lb = text.rfind("\n", 0, b) + 1
    le = text.find("\n", e)
    return text[lb:b], text[lb:le if le >= 0 else len(text)]


def _window(text: str, b: int, e: int, width: int = 300) -> str:
    return text[max(0, b - width):e + width]


def is_real_pii(text: str, b: int, e: int, kind: str) -> bool:
    value = text[b:e]
    before, line = _line(text, b, e)
    if kind == "email":
        local, _, domain = value.rpartition("@")
        if _MSGID_CONTEXT.search(before) or domain.lower().endswith("mail.gmail.com"):
            return False
        if _MSGID_LOCAL.search(local):
            return False
        return any(c.isalnum() for c in local)
    if kind == "ip_address":
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return False
        if ":" in value:  # IPv6: a version is never written so
            return "::" in value or any(c in "abcdefABCDEF" for c in value)
        return bool(_NET_WORDS.search(_window(text, b, e)))
    if kind == "phone":
        return bool(_PHONE_WORDS.search(_window(text, b, e)))
    return kind == "secret"


# --- the evaluation ------------------------------------------------------------------------------


def evaluate(name, run, supported, real, plants, review):
    t0 = time.perf_counter()
    real_spans = run(real)
    t_real = time.perf_counter() - t0
    masks = {k: 0 for k in TYPES}
    false = {k: 0 for k in TYPES}
    for i, (text, spans) in enumerate(zip(real, real_spans)):
        for b, e, k in spans:
            masks[k] += 1
            ok = is_real_pii(text, b, e, k)
            false[k] += not ok
            if review is not None:
                ctx = text[max(0, b - 40):e + 40].replace("\n", "\\n")
                review.write(f"{name}\t{k}\t{'real' if ok else 'FALSE'}\tdoc {i}\t{text[b:e]!r}\t{ctx}\n")
    scale = 5000 / len(real)
    plant_spans = run([p[0] for p in plants])
    found = {k: [0, 0] for k in TYPES}
    by_form = {}
    for (text, b, e, kind, form), spans in zip(plants, plant_spans):
        hit = any(k == kind and s <= b and t >= e and b - s <= 2 and t - e <= 2 for s, t, k in spans)
        found[kind][0] += hit
        found[kind][1] += 1
        f = by_form.setdefault(f"{kind}/{form}", [0, 0])
        f[0] += hit
        f[1] += 1
    mb = sum(len(t.encode()) for t in real) / 1e6
    return {
        "engine": name,
        "types": sorted(supported),
        "real_mb_per_s": round(mb / t_real, 2),
        "masks_per_5000": {k: round(masks[k] * scale, 1) for k in TYPES if k in supported},
        "false_masks_per_5000": {k: round(false[k] * scale, 1) for k in TYPES if k in supported},
        "recall": {k: round(found[k][0] / found[k][1], 4) for k in TYPES if k in supported},
        "recall_by_form": {f: round(h / n, 4) for f, (h, n) in sorted(by_form.items()) if f.split("/")[0] in supported},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real-docs", type=int, default=5000)
    ap.add_argument("--planted-docs", type=int, default=3000)
    ap.add_argument("--corpus-cache", default="/tmp/luminamoon-real-text.jsonl.gz")
    ap.add_argument("--engines", default="luminamoon,datatrove,scrubadub")
    ap.add_argument("--review", help="write every mask on the real text, with context, to this file")
    ap.add_argument("--json", help="write the results to this file")
    a = ap.parse_args()
    texts = real_text_corpus.cached_texts(a.corpus_cache)
    real = texts[:a.real_docs]
    plants = planted(texts[a.real_docs:] or texts, a.planted_docs)
    review = open(a.review, "w") if a.review else None
    results = []
    for name in a.engines.split(","):
        factory, supported = ENGINES[name]
        results.append(evaluate(name, factory(), supported, real, plants, review))
        print(json.dumps(results[-1]), flush=True)
    if review:
        review.close()
    print(f"\n{len(real)} real documents ({sum(len(t.encode()) for t in real) / 1e6:.1f} MB), "
          f"{len(plants)} planted values\n")
    print("| engine | type | masks / 5k docs | false masks / 5k docs | recall on planted |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in results:
        for k in TYPES:
            if k in r["recall"]:
                print(f"| {r['engine']} | {k} | {r['masks_per_5000'][k]} | {r['false_masks_per_5000'][k]} | "
                      f"{r['recall'][k]:.4f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"real_docs": len(real), "planted": len(plants), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

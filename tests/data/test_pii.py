"""PIIMasker (luminamoon.data.mask_pii): per-type tables, validators against Python references,
and properties (bytes outside matches unchanged, output valid UTF-8)."""
from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given, settings, strategies as st

from luminamoon import data

PLACEHOLDER = {"email": "<EMAIL>", "ip_address": "<IP_ADDRESS>", "phone": "<PHONE>", "credit_card": "<CREDIT_CARD>",
               "ssn": "<SSN>", "iban": "<IBAN>", "secret": "<SECRET>"}


def mask(text, **kw):
    out, counts = data.mask_pii([text], **kw)
    return out[0], counts


# --- independent references of the validators -------------------------------------------------

def luhn(digits: str) -> bool:
    ds = [int(c) for c in digits if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(ds)):
        if i % 2:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total % 10 == 0


def iban_mod97(iban: str) -> bool:
    s = iban.replace(" ", "").replace("-", "")
    s = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in s)) % 97 == 1


def ssn_ok(s: str) -> bool:
    a, g, n = re.split(r"[- .]", s)
    return a not in ("000", "666") and not a.startswith("9") and g != "00" and n != "0000"


def ipv4_ok(s: str) -> bool:
    parts = s.split(".")
    return len(parts) == 4 and all(p.isdigit() and int(p) <= 255 and (p == "0" or not p.startswith("0")) for p in parts)


# --- tables: at least ten positives and ten negatives per type --------------------------------

TOKEN36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PEM_RSA = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc+/=\n-----END RSA PRIVATE KEY-----"
PEM_P8 = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
PEM_EC = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIO\n-----END EC PRIVATE KEY-----"
PEM_SSH = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----"

POSITIVES = {
    "email": ["john.doe@example.com", "a@b.co", "first+tag@sub.domain.org", "o'brien@example.ie",
              "x_y-z@my-site.io", "USER@EXAMPLE.COM", "name.surname@university.ac.uk", "test123@test-domain.net",
              "a.b.c@d.e.fg", "info@company.com", "{x}|y~@example.travel",
              "ivan@пример.xn--p1ai"[0:0] + "ivan@example.xn--p1ai"],
    "ip_address": ["8.8.8.8", "192.168.1.1", "255.255.255.255", "10.0.0.1", "172.16.254.1", "1.2.3.4",
                   "2001:db8::1", "fe80::1ff:fe23:4567:890a", "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
                   "::ffff:192.0.2.128", "2606:4700:4700::1111", "::203.0.113.9"],
    "phone": ["(415) 555-2671", "415-555-2671", "415.555.2671", "+1 415 555 2671", "1-800-555-0199",
              "+44 20 7946 0958", "+49 30 901820", "+33 1 42 68 53 00", "+81-3-1234-5678", "+1 (212) 555-0100",
              "+61 2 9374 4000", "415 555 2671"],
    "credit_card": ["4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111", "5500 0000 0000 0004",
                    "3400 000000 00009", "6011 0000 0000 0004", "5105105105105100", "4012888888881881",
                    "378282246310005", "30569309025904", "6011111111111117", "3530111333300000"],
    "ssn": ["123-45-6789", "078-05-1120", "001-01-0001", "665-12-3456", "667-99-9999", "899-01-0001",
            "555-55-5555", "234-56-7890", "111-22-3333", "772-12-3456", "219-09-9999", "078 05 1123", "078.05.1123"],
    "iban": ["DE89 3704 0044 0532 0130 00", "DE89370400440532013000", "GB82 WEST 1234 5698 7654 32",
             "GB82WEST12345698765432", "FR14 2004 1010 0505 0001 3M02 606", "NL91 ABNA 0417 1643 00",
             "CH93 0076 2011 6238 5295 7", "ES91 2100 0418 4502 0005 1332", "IT60 X054 2811 1010 0000 0123 456",
             "BE68 5390 0754 7034", "NO93 8601 1117 947", "AT61 1904 3002 3457 3201",
             "GB82-WEST-1234-5698-7654-32", "LY83 0020 4800 0020 1001 2036 1", "LY83002048000020100120361"],
    "secret": ["AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A", "ghp_" + TOKEN36, "gho_" + TOKEN36,
               "ghs_" + TOKEN36, "github_pat_" + ("Ab1_" * 21)[:82], "glpat-" + "xY3_zW9-aB7cD5eF1gH2",
               "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxp-1234567890-abcdef",
               PEM_RSA, PEM_P8, PEM_EC, PEM_SSH],
}

NEGATIVES = {
    "email": ["john.doe@", "@example.com", "john@localhost", "https://medium.com/@john.doe/post",
              "http://user@host.com/path", "ftp://anon:pw@ftp.example.org/file", "user@-example.com",
              "user@example.c", "user@example.123", "a@b", "user.@example.com", "email at example dot com",
              "``@functools.wraps``", "``@pytest.fixture``"],
    "ip_address": ["999.1.1.1", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "v1.2.3.4", "12:30:45",
                   "std::vector<int>", "::", "1:2:3", "version 10.0.19041.1", "1.2.3.4a"],
    "phone": ["ISBN 0-306-40615-2", "ISBN-13: 978-0-306-40615-7", "doi:10.1000/182",
              "https://doi.org/10.1038/nphys1170", "123-456-7890", "555-123-456", "4155552671",
              "+0 123 456 789", "+12", "2024-01-15", "12345", "415-555-26711"],
    "credit_card": ["4111 1111 1111 1112", "1234 5678 9012 3456", "0000 0000 0000 0000", "4111 1111-1111 1111",
                    "411111111111", "41111111111111111111", "order 123456789012", "card ending 1111", "12/25",
                    "4111111111111111x", "ISBN 978-0-306-40615-7", "1517354021000", "1234567890128",
                    "1517354021000-1ab2c3", "4111 1111 1111 1111-extra"],
    "ssn": ["000-12-3456", "666-12-3456", "900-12-3456", "999-99-9999", "123-00-4567", "123-45-0000",
            "123-456-789", "1234-56-789", "12-345-6789", "123-45-67890", "a123-45-6789", "078-05.1123",
            "078 05-1123", "12 078 05 1123 7", "v078.05.1123"],
    "iban": ["DE88 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 33", "DE89 3704 0044 0532 0130 0",
             "ZZ89 3704 0044 0532 0130 00", "de89 3704 0044 0532 0130 00", "XX00 0000 0000 0000",
             "GB82-WEST 1234-5698-7654-32", "DE89 37040044 0532 0130 00", "ABCD1234", "NL91ABNA041716430"],
    "secret": ["AKIA1234", "AKIAIOSFODNN7EXAMPLEXYZ", "ghp_short", "glpat-short", "xoxb-short",
               "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----\nMII\n",
               "-----BEGIN RSA PRIVATE KEY-----\nno end here", "akiaiosfodnn7example", "ghp_" + TOKEN36[:35],
               "my_AKIAIOSFODNN7EXAMPLE"],
}


def test_tables_are_large_enough():
    for kind in PLACEHOLDER:
        assert len(POSITIVES[kind]) >= 10 and len(NEGATIVES[kind]) >= 10, kind
    # The positives really are valid by the independent references.
    assert all(luhn(c) for c in POSITIVES["credit_card"])
    assert all(iban_mod97(i) for i in POSITIVES["iban"])
    assert all(ssn_ok(s) for s in POSITIVES["ssn"])
    assert not luhn("4111 1111 1111 1112") and not luhn("1234 5678 9012 3456")
    assert not iban_mod97("DE88 3704 0044 0532 0130 00")
    for ip in POSITIVES["ip_address"]:
        ipaddress.ip_address(ip)


# The words before each value: an IP address's line names the network (a dotted
# quad of a version's shape, "1.2.3.4", is an address only there; see
# test_versions_are_addresses_only_on_network_lines).
CONTEXT = {"ip_address": "the host"}


@pytest.mark.parametrize("kind", sorted(PLACEHOLDER))
def test_positives(kind):
    for value in POSITIVES[kind]:
        text = f"{CONTEXT.get(kind, 'before')} {value} after"
        out, counts = mask(text)
        assert out == f"{CONTEXT.get(kind, 'before')} {PLACEHOLDER[kind]} after", (kind, value, out)
        assert counts[kind] == 1
        assert sum(counts.values()) == 1


@pytest.mark.parametrize("kind", sorted(PLACEHOLDER))
def test_negatives(kind):
    for value in NEGATIVES[kind]:
        text = f"before {value} after"
        out, counts = mask(text)
        assert out == text, (kind, value, out)
        assert sum(counts.values()) == 0


def test_mailto_and_punctuation_context():
    assert mask("mailto:jane@example.org")[0] == "mailto:<EMAIL>"
    assert mask("(info@company.com).")[0] == "(<EMAIL>)."
    assert mask("ip=8.8.8.8, next")[0] == "ip=<IP_ADDRESS>, next"


def test_keep_private_ip_option():
    private = ["192.168.1.1", "10.0.0.1", "127.0.0.1", "172.16.0.5", "169.254.1.1", "2001:db8::1", "fe80::1",
               "::1"[0:0] + "fd00::1", "224.0.0.1", "100.64.0.1"]
    for ip in private:
        assert mask(f"a {ip} b", keep_private_ip=True)[0] == f"a {ip} b", ip
        assert ipaddress.ip_address(ip).is_private or ipaddress.ip_address(ip).is_reserved or \
            ipaddress.ip_address(ip).is_multicast or ipaddress.ip_address(ip) in ipaddress.ip_network("100.64.0.0/10")
    assert mask("dns 8.8.8.8 b", keep_private_ip=True)[0] == "dns <IP_ADDRESS> b"
    assert mask("a 2606:4700::1111 b", keep_private_ip=True)[0] == "a <IP_ADDRESS> b"


def test_types_subset_and_counts():
    text = "mail a@b.co, ip 8.8.8.8, ssn 123-45-6789, card 4111 1111 1111 1111 and a@b.co"
    out, counts = mask(text, types=["email", "ssn"])
    assert out == "mail <EMAIL>, ip 8.8.8.8, ssn <SSN>, card 4111 1111 1111 1111 and <EMAIL>"
    assert counts == {"email": 2, "ssn": 1}
    out, counts = data.mask_pii([text, text, "nothing"])
    assert counts["email"] == 4 and counts["credit_card"] == 2 and counts["ip_address"] == 2
    assert out[2] == "nothing"


def test_engine_is_named():
    from luminamoon import _native

    assert _native._PiiMasker(None, False).engine in ("vectorscan", "re2")
    assert _native._PiiMasker([], False).engine == "none"


def test_errors():
    with pytest.raises(ValueError, match="unknown PII type"):
        data.mask_pii(["x"], types=["emial"])
    with pytest.raises(ValueError, match="not valid UTF-8"):
        data.mask_pii([b"ok", b"bad \xff"])


# --- validators against the references on generated candidates ---------------------------------

def card_network_ok(d: str) -> bool:
    """The networks' published issuer ranges (IIN prefix -> lengths)."""
    n, p = len(d), lambda k: int(d[:k])
    rules = [(p(1) == 4, {13, 16, 19}),                                       # Visa
             (51 <= p(2) <= 55 or 2221 <= p(4) <= 2720, {16}),               # Mastercard
             (p(2) in (34, 37), {15}),                                        # American Express
             (300 <= p(3) <= 305 or p(2) in (36, 38, 39), set(range(14, 20))),  # Diners Club
             (p(4) == 6011 or 644 <= p(3) <= 649 or p(2) == 65 or 622126 <= p(6) <= 622925, set(range(16, 20))),
             (3528 <= p(4) <= 3589, set(range(16, 20))),                      # JCB
             (p(2) == 62, set(range(16, 20))),                                # UnionPay
             (2200 <= p(4) <= 2204, {16}),                                    # Mir
             (p(2) in (50, 56, 57, 58, 63, 67), set(range(13, 20)))]          # Maestro
    return next((n in lengths for hit, lengths in rules if hit), False)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from("23456"), st.text("0123456789", min_size=15, max_size=15))
def test_card_decision_is_network_and_luhn(first, rest):
    digits = first + rest
    grouped = " ".join(digits[i:i + 4] for i in range(0, 16, 4))
    out, _ = mask(f"card {grouped} end")
    assert (out == "card <CREDIT_CARD> end") == (luhn(digits) and card_network_ok(digits)), digits


@settings(max_examples=200, deadline=None)
@given(st.integers(13, 19), st.text("0123456789", min_size=19, max_size=19))
def test_card_lengths_per_network(length, pool):
    digits = pool[:length]
    # The check digit that makes it Luhn-valid, so that the network rule alone decides.
    for last in "0123456789":
        if luhn(digits[:-1] + last):
            digits = digits[:-1] + last
            break
    out, _ = mask(f"card {digits} end")
    assert (out == "card <CREDIT_CARD> end") == (digits[0] != "0" and card_network_ok(digits)), digits


# --- look-alikes of technical text: left untouched, byte for byte -------------------------------

LOOK_ALIKES = [
    # versions, RCS revisions, OIDs, section numbers (IP)
    "Git 1.7.5.2", "      Git 1.8.1.1\n", "Prepare for 1.6.5.5", "Standards-Version: 4.6.2.0", "v1.2.3.4",
    "Version v1.7.8.6; changes since v1.7.8.5:", "Revision 1.2.3.4 of foo.c,v", "$Id: foo.c,v 1.12.2.3 2004/01/02 $",
    "OID 1.3.6.1.4.1.311.21.7", "see section 4.2.1.3 of the manual", "mesa (>= 6.3.1.1-0ubuntu1)",
    "XFree86 4.3.0.1", "Bump to 1.0.99.3", "Upgrade V8 to 2.0.5.4", "2014-02-11 (3.8.3.1)",
    "python3-foo (2.3.1.4+dfsg-1) unstable; urgency=low", "clang 1:14.0.0~++20220202101403+a1b2c3d4-1~exp1",
    # phones: AWS account ids, clause numbers, snapshot stamps, digit runs
    "arn:aws:iam::123456789012:role/admin", "account 123456789012 owns it", "DFARS 252.227-7013",
    "FAR 52.227-19 and 252.227-7014", "~++20220202101403+", "snapshot +20220202101403", "id 12345678901 here",
    "counter 14155552671", "build 2.4.1-2125552368-1",
    # cards: job ids, SIDs, epoch-ms timestamps, tables
    "job 1517354021000-1ab2c3 done", "S-1-5-21-3623811015-3361044348-30300820-1013",
    "at 1517354021000 ms", "1234 5678 9012 3456 7890", "4111 1111 1111 1111 2222 3333",
    "uuid 4111111111111111-aa", "arn:aws:s3:::bucket-4111111111111111",
    # e-mail: Message-IDs and decorators
    "Message-ID: <20010803034044.A11521@deadbeast.net>", "Message-Id: <200907191328.23816.lasse.collin@tukaani.org>",
    "In-Reply-To: <CAKx1yz2@mail.example.org>", "<1409731849-51897-1-git-send-email-chris@demorecorder.com>",
    "(<uryn1vafyyc.fsf@ixi.eng.ascend.com>)", "<CAHk-=wj8Kc2@mail.gmail.com>",
    "``@functools.wraps``", "use ``@pytest.fixture`` here", "`@dataclasses.dataclass`",
    # invalid IBANs: not cards either
    "DE88 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 33",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_left_alone(text):
    out, counts = mask(f"before {text} after")
    assert out == f"before {text} after", (text, out)
    assert sum(counts.values()) == 0


def test_versions_are_addresses_only_on_network_lines():
    # A dotted quad of a version's shape (first part one digit, second under 30)
    out, _ = mask("Prepare for 1.2.3.4 now")
    assert out == "Prepare for 1.2.3.4 now"
    for line in ("the DNS server 8.8.8.8 answered", "ping 1.2.3.4", "ip=1.1.1.1", "host: 4.2.2.2"):
        assert "<IP_ADDRESS>" in mask(line)[0], line
    # Outside that shape, an address needs no such word; a version marker still wins.
    assert mask("from 203.0.113.7 twice")[0] == "from <IP_ADDRESS> twice"
    assert mask("version 203.0.113.7")[0] == "version 203.0.113.7"
    # The IPv4 tail of an IPv6 address is masked with it, as one address.
    assert mask("v6 ::ffff:203.0.113.9 and ::203.0.113.9.")[0] == "v6 <IP_ADDRESS> and <IP_ADDRESS>."


def test_no_cross_type_masks():
    # The digit groups of an IBAN whose check fails are no card or phone.
    bad = "DE00 4111 1111 1111 1111 00"
    assert mask(f"pay {bad} now")[0] == f"pay {bad} now"
    # A rejected version string lends no digits to a phone.
    assert mask("Git 2.212.555.2671")[0] == "Git 2.212.555.2671"


def test_phone_forms():
    # Supported: E.164 with '+', NANP with separators or parentheses (Note [phone forms]).
    for value in ("+1 (212) 555-0100", "415 555-2671", "+4420 7946 0958", "+442079460958"):
        assert mask(f"tel {value} x")[0] == "tel <PHONE> x", value
    # Not supported: national forms without '+' outside NANP, bare digit runs.
    for value in ("030 901820", "06 12 34 56 78", "4155552671", "14155552671", "252.227-7013"):
        assert mask(f"tel {value} x")[0] == f"tel {value} x", value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=4, max_size=4))
def test_ipv4_decision_is_octet_range(octets):
    ip = ".".join(map(str, octets))
    out, _ = mask(f"host {ip} end")
    assert (out == "host <IP_ADDRESS> end") == ipv4_ok(ip)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 999), st.integers(0, 99), st.integers(0, 9999))
def test_ssn_decision_is_ranges(a, g, n):
    ssn = f"{a:03d}-{g:02d}-{n:04d}"
    out, _ = mask(f"id {ssn} end")
    assert (out == "id <SSN> end") == ssn_ok(ssn)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 99), st.text("0123456789", min_size=18, max_size=18))
def test_iban_decision_is_mod97(check, bban):
    iban = f"DE{check:02d}{bban}"
    out, _ = mask(f"pay {iban} now")
    assert (out == "pay <IBAN> now") == iban_mod97(iban)


# --- properties ---------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [" ", "\n", "word", "é", "日本", "😀", ".", ",", "@", ":", "-", "(", ")", "+", "/", "1", "42", "255", "8.8.8.8",
     "a@b.co", "x.y@example.org", "415-555-2671", "+44 20 7946 0958", "4111 1111 1111 1111", "123-45-6789",
     "DE89 3704 0044 0532 0130 00", "AKIAIOSFODNN7EXAMPLE", "2001:db8::1", "ISBN", "http://", "mailto:"])
_PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in PLACEHOLDER.values()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<>"), max_size=5)), max_size=40))
def test_mask_changes_only_matches(pieces):
    text = "".join(pieces)
    out_t, counts = data.mask_pii([text])
    raw = out_t.get_bytes(0)
    out = raw.decode("utf-8")  # strict: the output is valid UTF-8
    kept = _PLACEHOLDER_RE.split(out)
    assert len(kept) - 1 == sum(counts.values())
    # The text between placeholders is the input's own bytes, in order, each
    # placeholder standing for a non-empty span of the input.
    pattern = re.escape(kept[0]) + "".join("(.+?)" + re.escape(p) for p in kept[1:])
    assert re.fullmatch(pattern, text, re.S), (text, out)


def test_every_planted_form_is_found_with_its_surroundings_intact():
    # The planted set of bench/pii_eval.py: every type and supported form, in its sentences.
    import os
    import random
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import pii_eval

    rng = random.Random(5)
    for kind, forms in pii_eval.FORMS.items():
        for form, make in forms.items():
            for _ in range(20):
                value = make(rng)
                sentence = rng.choice(pii_eval.SENTENCES[kind])
                before, after = "Changes in 1.2.3.4 (see Git 1.7.5.2).\n\n", "\n\n -- Maintainer, build 1517354021000-1ab2c3"
                text = before + sentence.replace("{v}", value) + after
                out, counts = mask(text)
                assert out == before + sentence.replace("{v}", PLACEHOLDER[kind]) + after, (kind, form, value, out)
                assert counts == {k: int(k == kind) for k in PLACEHOLDER}, (kind, form, value, counts)

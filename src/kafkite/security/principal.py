"""The principal of an SSL client: its certificate's subject distinguished name in RFC 2253 form (as Java's
X500Principal.getName() writes it: most specific first, `CN=alice,OU=Eng,O=Acme,C=US`), through Kafka's
`ssl.principal.mapping.rules` (SslPrincipalMapper).

Rules, comma separated, tried in order; the first that gives a name wins:
- `DEFAULT`: the DN itself;
- `RULE:pattern/replacement/[LU]`: when the Java-style regular expression `pattern` matches the whole DN, the DN
  with every match replaced by `replacement` (`$1` back references; a reference to a group the pattern does not
  have is literal, as Kafka does), then lower (`L`) or upper (`U`) cased.
A DN no rule applies to fails the connection ("No rules apply to <dn>, rules [...]"). Sans-IO.
"""
from __future__ import annotations

import re

from ..config import ConfigError

# Kafka's RULE_PATTERN: DEFAULT | RULE:pattern/replacement/[LU] | anything else (refused below)
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")


class NoMatchingRule(Exception):
    pass


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = "") -> None:
        self.default = pattern is None
        self.source = pattern
        self.pattern = None if pattern is None else re.compile(pattern)
        self.replacement = replacement
        self.case = case

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        out = self.pattern.sub(lambda m: _expand(self.replacement, m, groups), dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out

    def __repr__(self) -> str:
        if self.default:
            return "DEFAULT"
        return f"RULE:{self.source}/{self.replacement}" + (f"/{self.case}" if self.case else "")


def _expand(replacement: str, m: re.Match, groups: int) -> str:
    """Java's Matcher.appendReplacement with Kafka's escapeLiteralBackReferences: `$n` is group n, reading the
    longest number that names a group (`$12` with 3 groups is group 1 then '2'); a `$n` past the groups is
    literal; `\\x` is x."""
    out, i = [], 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            digits = _BACKREF.match(replacement, i).group(1)
            n = digits
            while len(n) > 1 and int(n) > groups:
                n = n[:-1]
            if int(n) > groups or (groups == 0 and n != "0"):
                out.append("$" + n)
            else:
                out.append(m.group(int(n)) or "")
            i += 1 + len(n)
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    def name(self, dn: str) -> str:
        for r in self.rules:
            name = r.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(repr, self.rules))}]")


def principal_mapper(rules: str | None) -> PrincipalMapper:
    """ssl.principal.mapping.rules -> its mapper (ConfigError with Kafka's message for a rule it cannot read)."""
    text = (rules if rules is not None else "DEFAULT").strip()
    parts = [m.group(1) for m in _SPLITTER.finditer(text) if m.group(1) is not None]
    out = []
    for rule in parts:
        m = _PARSER.match(rule)
        if m is None:
            raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: Invalid rule: "
                              f"{rule}")
        if m.end() != len(rule):
            raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: Invalid rule: "
                              f"`{rule}`, unmatched substring: `{rule[m.end():]}`")
        if m.group(1) is not None:
            out.append(_Rule())
        elif m.group(2) is not None:
            try:
                out.append(_Rule(m.group(2), m.group(3), m.group(4)))
            except re.error as exc:
                raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: {exc}") \
                    from None
        elif m.group(5):
            raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: Invalid rule: "
                              f"`{rule}`, unmatched substring: `{rule}`")
    return PrincipalMapper(out)


def subject_dn(der: bytes) -> str:
    """A DER certificate's subject in RFC 2253 form (Java's X500Principal.getName(): CN, C, L, ST, O, OU, STREET,
    DC, UID by keyword, other attributes as OID=#hex)."""
    from cryptography import x509
    cert = x509.load_der_x509_certificate(der)
    return cert.subject.rfc4514_string()

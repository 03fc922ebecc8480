"""ssl.principal.mapping.rules with Kafka's SslPrincipalMapper semantics: the examples of Kafka's documentation and
SslPrincipalMapperTest, invalid rules refused with Kafka's message, and a DN no rule applies to."""
from __future__ import annotations

import pytest

from kafkite.config import ConfigError
from kafkite.security.principal import NoMatchingRule, principal_mapper

DOC_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT")


@pytest.mark.parametrize("dn, name", [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=JavaSoft,o=Sun Microsystems", "duke"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafka_documented_examples(dn, name):
    assert principal_mapper(DOC_RULES).name(dn) == name


def test_default_and_case_and_upper():
    assert principal_mapper(None).name("CN=alice,O=acme") == "CN=alice,O=acme"
    assert principal_mapper("DEFAULT").name("CN=alice,O=acme") == "CN=alice,O=acme"
    assert principal_mapper("RULE:^CN=(.*?),O=(.*)$/$1@$2/U").name("CN=alice,O=acme") == "ALICE@ACME"
    # whitespace around rules and commas is ignored, as Kafka's RULE_SPLITTER does
    assert principal_mapper("  RULE:^CN=(.*?),.*$/$1/L  ,  DEFAULT ").name("CN=Bob,O=x") == "bob"
    # a back reference to a group the pattern lacks is literal; $12 with one group is group 1 then "2"
    assert principal_mapper("RULE:^CN=(.*?),.*$/$1-$2/").name("CN=a,O=b") == "a-$2"
    assert principal_mapper("RULE:^CN=(.*?),.*$/$12/").name("CN=a,O=b") == "a2"
    # an escaped slash in the pattern
    assert principal_mapper(r"RULE:^CN=(.*?)\/x,.*$/$1/").name("CN=a/x,O=b") == "a"


def test_no_rule_applies():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a,O=b, rules"):
        principal_mapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=a,O=b")


@pytest.mark.parametrize("rules", ["default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
                                   "RULE:CN=(.*?),OU=ServiceUsers.*/$1", "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
                                   "RULE:CN=(.*?),OU=ServiceUsers.*/L", "RULE:CN=(.*?),OU=ServiceUsers.*/U",
                                   "RULE:CN=(.*?),OU=ServiceUsers.*/LU"])
def test_invalid_rules_as_kafka(rules):
    with pytest.raises(ConfigError, match="Invalid rule"):
        principal_mapper(rules)

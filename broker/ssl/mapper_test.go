package ssl

import (
	"errors"
	"strings"
	"testing"
)

// The cases of Kafka's SslPrincipalMapperTest.

func TestMappingRulesValid(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := NewPrincipalMapper(rules); err != nil {
			t.Errorf("%q: %v", rules, err)
		}
	}
}

func TestMappingRulesInvalid(t *testing.T) {
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// Gregor's own refusals: Java-only regular expressions, and
		// replacements Java cannot apply.
		"RULE:^CN=(?=x)(.*)$/$1/",
		"RULE:^CN=(.*)$/$1$/",
		"RULE:^CN=(.*)$/${nope}/",
		"RULE:^CN=(.*)$/$99999999999/",
	} {
		if _, err := NewPrincipalMapper(rules); err == nil {
			t.Errorf("%q accepted", rules)
		}
	}
}

func TestMappingRulesMap(t *testing.T) {
	m, err := NewPrincipalMapper(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		got, err := m.Name(dn)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestMappingRulesSplitting(t *testing.T) {
	for rules, want := range map[string]string{
		"":                               "[]",
		"DEFAULT":                        "[DEFAULT]",
		"RULE://":                        "[RULE:/]",
		"RULE:/.*/":                      "[RULE:/.*]",
		"RULE:/.*/L":                     "[RULE:/.*/L]",
		"RULE://,DEFAULT":                "[RULE:/, DEFAULT]",
		"  RULE:// ,  DEFAULT  ":         "[RULE:/, DEFAULT]",
		"  RULE:   /     / ,  DEFAULT  ": "[RULE:   /     , DEFAULT]",
		"  RULE:  /     /U   ,DEFAULT  ": "[RULE:  /     /U, DEFAULT]",
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ": "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
		",   , , ,      , , ,   ":                                "[]",
		",,RULE://,,,DEFAULT,,":                                  "[RULE:/, DEFAULT]",
		",  , RULE: /   /    ,,,   DEFAULT, ,   ":                "[RULE: /   , DEFAULT]",
		"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,":             "[RULE:   /  /U, DEFAULT]",
		`RULE:\/\\\(\)\n\t/\/\//`:                                `[RULE:\/\\\(\)\n\t/\/\/]`,
		`RULE:\**\/+/*/L,RULE:\/*\**/**/`:                        `[RULE:\**\/+/*/L, RULE:\/*\**/**]`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`: `[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
	} {
		m, err := NewPrincipalMapper(rules)
		if err != nil {
			t.Errorf("%q: %v", rules, err)
			continue
		}
		if got := m.String(); got != want {
			t.Errorf("%q splits as %s, want %s", rules, got, want)
		}
	}
}

func TestMappingRulesCommaWithWhitespace(t *testing.T) {
	m, err := NewPrincipalMapper(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Errorf("got %q, %v", got, err)
	}
}

// Java's replaceAll semantics where Go's would differ: an empty match at
// the end after a match, references past the last group made literal by
// Kafka, Java's greedy multi-digit references, absent groups.
func TestMappingRulesJavaReplacement(t *testing.T) {
	for _, c := range []struct{ rule, dn, want string }{
		{"RULE:(.*)/[$1]/", "CN=a", "[CN=a][]"},
		{"RULE:^(.*)$/[$1]/", "CN=a", "[CN=a]"},
		{"RULE:(.*)\\b/[$1]/", "CN=a", "[CN=a][]"},
		{"RULE:(.*)\\B/[$1]/", "CN=a.", "[CN=a.][]"},
		{"RULE:(.*)\\B/[$1]/", "CN=a", ""},
		{"RULE:CN=(.*),OU=(.*)/$2-$1-$3/", "CN=a,OU=b", "b-a-$3"},
		{"RULE:CN=(.*),OU=(.*)/$12/", "CN=a,OU=b", "a2"},
		{"RULE:CN=(a)?(.*)/<$1>$2/", "CN=b", "<>b"},
		{"RULE:CN=(?P<who>.*)/${who}\\$/", "CN=b", "b$"},
		{"RULE:CN=(.*)/$1/U", "CN=bob", "BOB"},
		{"RULE:X=(.*)/$1/", "CN=bob", ""}, // does not apply
	} {
		m, err := NewPrincipalMapper(c.rule)
		if err != nil {
			t.Errorf("%s: %v", c.rule, err)
			continue
		}
		got, err := m.Name(c.dn)
		if c.want == "" {
			if !errors.Is(err, ErrNoMatchingRule) {
				t.Errorf("%s on %q: got %q, %v; want no matching rule", c.rule, c.dn, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s on %q: got %q, %v; want %q", c.rule, c.dn, got, err, c.want)
		}
	}
}

// Kafka's escaping of out-of-range references uses positions of the
// original text even after inserting backslashes.
func TestKafkaEscapeBackReferences(t *testing.T) {
	for _, c := range []struct {
		in     string
		groups int
		want   string
	}{
		{"$1@$2", 2, "$1@$2"},
		{"$4", 3, `\$4`},
		{"$4$5", 3, `\$\4$5`},
		{"$123", 12, "$123"},
		{"$10", 0, "$10"},
		{"$05", 1, "$05"},
	} {
		got, err := kafkaEscapeBackReferences(c.in, c.groups)
		if err != nil || got != c.want {
			t.Errorf("%q with %d groups: %q, %v; want %q", c.in, c.groups, got, err, c.want)
		}
	}
}

func FuzzMappingRules(f *testing.F) {
	for _, s := range []string{"DEFAULT", "RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L, DEFAULT", `RULE:\/*\**/**/`, ",,RULE://,,,DEFAULT,,", "RULE:(.*)/[$1]/"} {
		f.Add(s, "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := NewPrincipalMapper(rules)
		if err != nil {
			return
		}
		_ = m.String()
		name, err := m.Name(dn)
		if err == nil && len(m.rules) == 0 {
			t.Fatalf("no rules mapped %q to %q", dn, name)
		}
	})
}

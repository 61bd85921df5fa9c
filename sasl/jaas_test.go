package sasl

import (
	"maps"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		module     string
		flag       string
		options    map[string]string
	}{
		{
			name:    "plain with users",
			text:    `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
			module:  PlainLoginModule,
			flag:    "REQUIRED",
			options: map[string]string{"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"},
		},
		{
			name:    "no options, flag in any case",
			text:    "org.apache.kafka.common.security.scram.ScramLoginModule Required;",
			module:  ScramLoginModule,
			flag:    "REQUIRED",
			options: map[string]string{},
		},
		{
			name:    "unquoted word values, single quotes, comments and newlines",
			text:    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule optional // the module\n unsecuredLoginStringClaim_sub=thePrincipalName /* block\n comment */ unsecuredLoginListClaim_scope=',KAFKA_BROKER,LOGIN' ;",
			module:  OAuthBearerLoginModule,
			flag:    "OPTIONAL",
			options: map[string]string{"unsecuredLoginStringClaim_sub": "thePrincipalName", "unsecuredLoginListClaim_scope": ",KAFKA_BROKER,LOGIN"},
		},
		{
			name:    "escapes in quoted strings",
			text:    `m sufficient a="q\"uote\\back\tTab\101" b='it s';`,
			module:  "m",
			flag:    "SUFFICIENT",
			options: map[string]string{"a": "q\"uote\\back\tTabA", "b": "it s"},
		},
		{
			name:    "later option wins",
			text:    `m requisite user_a="1" user_a="2";`,
			module:  "m",
			flag:    "REQUISITE",
			options: map[string]string{"user_a": "2"},
		},
		{
			name:    "words take digits, dots, dashes, dollars",
			text:    `m required k=a1.b-c_$d;`,
			module:  "m",
			flag:    "REQUIRED",
			options: map[string]string{"k": "a1.b-c_$d"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseJAAS(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if e.LoginModule != tc.module || e.Flag != tc.flag || !maps.Equal(e.Options, tc.options) {
				t.Fatalf("got %q %q %v, want %q %q %v", e.LoginModule, e.Flag, e.Options, tc.module, tc.flag, tc.options)
			}
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "Login module not specified in JAAS config"},
		{"   // only a comment", "Login module not specified in JAAS config"},
		{"m", "Login module control flag not specified in JAAS config"},
		{"m maybe;", "Invalid login module control flag 'maybe' in JAAS config"},
		{`m required a="b"`, "JAAS config entry not terminated by semi-colon"},
		{`m required a;`, "Value not specified for key 'a' in JAAS config"},
		{`m required a=;`, "Value not specified for key 'a' in JAAS config"},
		// StreamTokenizer reads 3000 as a number, which has no string
		// value: Kafka refuses an unquoted numeric value.
		{`m required skew=3000;`, "Value not specified for key 'skew' in JAAS config"},
		{`m required a="1"; n required;`, "JAAS config property contains 2 login modules, should be 1 module"},
		{`m required k=/path;`, "Value not specified for key 'k' in JAAS config"},
	} {
		_, err := ParseJAAS(tc.text)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseJAAS(%q) = %v, want %q", tc.text, err, tc.want)
		}
	}
}

func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`)
	f.Add("m required a='x\\077y' // c\n b=c /* d */;")
	f.Add(`m required -1=2 .5="x" a="unterminated`)
	f.Fuzz(func(t *testing.T, text string) {
		entries, err := ParseJAASEntries(text)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.LoginModule == "" && !strings.ContainsAny(text, `"'`) {
				t.Fatalf("empty login module from %q", text)
			}
			switch e.Flag {
			case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
			default:
				t.Fatalf("flag %q from %q", e.Flag, text)
			}
		}
	})
}

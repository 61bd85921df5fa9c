package config

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseProperties(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"equals", "a=b", map[string]string{"a": "b"}},
		{"colon", "a:b", map[string]string{"a": "b"}},
		{"whitespace separator", "a b", map[string]string{"a": "b"}},
		{"whitespace around separator", "  a \t =  b c  ", map[string]string{"a": "b c  "}},
		{"only one separator is skipped", "a==b", map[string]string{"a": "=b"}},
		{"whitespace then colon then equals", "a : =b", map[string]string{"a": "=b"}},
		{"key without value", "a", map[string]string{"a": ""}},
		{"key with separator only", "a=", map[string]string{"a": ""}},
		{"hash comment", "# c=d\na=b", map[string]string{"a": "b"}},
		{"bang comment", "  ! c=d\na=b", map[string]string{"a": "b"}},
		{"hash inside value is not a comment", "a=b#c", map[string]string{"a": "b#c"}},
		{"blank lines", "\n\n  \t\na=b\n\n", map[string]string{"a": "b"}},
		{"CRLF and CR", "a=1\r\nb=2\rc=3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"continuation", "a=one,\\\n    two,\\\n\tthree", map[string]string{"a": "one,two,three"}},
		{"continuation of comment is still a comment", "# x\\\na=b", map[string]string{"a": "b"}},
		{"continued line starting with hash is data", "a=b\\\n#c", map[string]string{"a": "b#c"}},
		{"even backslashes do not continue", "a=b\\\\\nc=d", map[string]string{"a": `b\`, "c": "d"}},
		{"trailing backslash at EOF", "a=b\\", map[string]string{"a": "b"}},
		{"escaped separator in key", `a\=b\:c\ d=e`, map[string]string{"a=b:c d": "e"}},
		{"escapes in value", `a=t\tn\nr\rf\fx\y\\`, map[string]string{"a": "t\tn\nr\rf\fxy\\"}},
		{"unicode escape", `a=caf\u00e9 \u20AC`, map[string]string{"a": "café €"}},
		{"surrogate pair", `a=\ud83d\ude00`, map[string]string{"a": "😀"}},
		{"escaped backslash before separator ends key", `a\\=b`, map[string]string{`a\`: "b"}},
		{"later duplicate wins", "a=1\na=2", map[string]string{"a": "2"}},
		{"form feed is whitespace", "\fa\f=\fb", map[string]string{"a": "b"}},
		{"utf8 passes through", "k=ünïcode", map[string]string{"k": "ünïcode"}},
		{"listeners", "listeners=PLAINTEXT://:9092,CONTROLLER://:9093", map[string]string{"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProperties(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParsePropertiesMalformedUnicode(t *testing.T) {
	for _, in := range []string{`a=\u12`, `a=\uzzzz`, `\u00g0=b`} {
		if _, err := ParseProperties(in); err == nil || !strings.Contains(err.Error(), `Malformed \uxxxx encoding.`) {
			t.Errorf("%q: got %v", in, err)
		}
	}
}

// The sample server.properties Kafka 4.3 ships (combined mode), trimmed.
func TestParsePropertiesKafkaSample(t *testing.T) {
	in := `############################# Server Basics #############################
# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller

# The node id associated with this instance's roles
node.id=1

# List of controller endpoints used connect to the controller cluster
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
log.dirs=/tmp/kraft-combined-logs
offsets.topic.replication.factor=1
log.retention.hours=168
`
	got, err := ParseProperties(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 12 || got["log.dirs"] != "/tmp/kraft-combined-logs" || got["node.id"] != "1" {
		t.Fatalf("got %v", got)
	}
}

func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{"a=b", "a\\\n b", `\u0041=\u00`, "# c\n!d\n e : f", "a\\", "\\u"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // the round trip below compares text, which needs valid UTF-8
		}
		props, err := ParseProperties(s)
		if err != nil {
			return
		}
		// Whatever parses must survive a write/read round trip.
		var b strings.Builder
		for k, v := range props {
			b.WriteString(escapeForTest(k, true) + "=" + escapeForTest(v, false) + "\n")
		}
		again, err := ParseProperties(b.String())
		if err != nil {
			t.Fatalf("re-parse of %q failed: %v", b.String(), err)
		}
		if !reflect.DeepEqual(props, again) {
			t.Fatalf("round trip changed %q into %q", props, again)
		}
	})
}

// escapeForTest writes a key or value the way Properties.store does.
func escapeForTest(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\', '=', ':', '#', '!':
			b.WriteString(`\` + string(r))
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\f':
			b.WriteString(`\f`)
		case ' ':
			if key || i == 0 {
				b.WriteString(`\ `)
			} else {
				b.WriteRune(r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

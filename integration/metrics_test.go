package integration

import "testing"

func TestParseExposition(t *testing.T) {
	text := `# HELP x a thing
# TYPE x gauge
x 1
kafka_log_log_size{topic="a,b",partition="0",} 12.0
y{l="q\"uote"} 3 1700000000000
`
	samples, err := ParseExposition(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 3 || samples[0].Name != "x" || samples[0].Value != 1 ||
		samples[1].Labels["topic"] != "a,b" || samples[1].Labels["partition"] != "0" || samples[1].Value != 12 ||
		samples[2].Labels["l"] != `q"uote` || samples[2].Value != 3 {
		t.Fatalf("%+v", samples)
	}
	if got, n := sumOf(samples, "kafka_log_log_size", map[string]string{"topic": "a,b"}); got != 12 || n != 1 {
		t.Fatalf("sumOf: %v over %d", got, n)
	}
	for _, bad := range []string{"x{a=\"1\" 2", "x notanumber", "x{a=1} 2"} {
		if _, err := ParseExposition(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

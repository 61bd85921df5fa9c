package controllerclient

import (
	"testing"

	"github.com/gregorbroker/gregor/broker/authz"
)

// TestPrincipalSerialization: an Envelope's principal is Kafka's
// DefaultKafkaPrincipalBuilder.serialize, byte for byte: the version (0)
// and a flexible DefaultPrincipalData (compact strings, the token flag,
// no tagged fields).
func TestPrincipalSerialization(t *testing.T) {
	p := authz.Principal{Type: "User", Name: "CN=alice,O=x"}
	b := EncodePrincipal(p, false)
	want := append(append([]byte{0, 0, 5}, "User"...), 13)
	want = append(append(want, "CN=alice,O=x"...), 0, 0)
	if string(b) != string(want) {
		t.Fatalf("encoded %x, want %x", b, want)
	}
	got, token, err := DecodePrincipal(b)
	if err != nil || got != p || token {
		t.Fatalf("round trip %v %v %v", got, token, err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1, 0}, {0, 0, 0xff}} {
		if _, _, err := DecodePrincipal(bad); err == nil {
			t.Errorf("%x read as a principal", bad)
		}
	}
}

// FuzzDecodePrincipal: what an envelope carries as its principal either
// reads or is refused; what reads survives a round trip.
func FuzzDecodePrincipal(f *testing.F) {
	f.Add(EncodePrincipal(authz.Principal{Type: "User", Name: "alice"}, false))
	f.Add(EncodePrincipal(authz.Principal{Type: "User", Name: ""}, true))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, token, err := DecodePrincipal(b)
		if err != nil {
			return
		}
		again, token2, err := DecodePrincipal(EncodePrincipal(p, token))
		if err != nil || again != p || token2 != token {
			t.Fatalf("round trip of %+v: %+v %v", p, again, err)
		}
	})
}

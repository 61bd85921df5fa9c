package protocol

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestUUIDText(t *testing.T) {
	id := UUID{0xff, 0xfe}
	s := id.String()
	if len(s) != 22 || strings.ContainsAny(s, "+/=") {
		t.Fatalf("uuid text %q", s)
	}
	back, err := ParseUUID(s)
	if err != nil || back != id {
		t.Fatalf("parse %v %v", back, err)
	}
	// Kafka's example topic id text decodes.
	if _, err := ParseUUID("MkU3OEVBNTcwNTJENDM2Qg"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "short", "MkU3OEVBNTcwNTJENDM2Qg==", "MkU3OEVBNTcwNTJENDM2Q+"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) accepted", bad)
		}
	}
}

func TestRandomUUIDAvoidsKafkaReservedValues(t *testing.T) {
	seen := map[UUID]bool{}
	for range 2000 {
		u := RandomUUID()
		if binary.BigEndian.Uint64(u[:8]) == 0 || strings.HasPrefix(u.String(), "-") {
			t.Fatalf("reserved uuid %s", u)
		}
		if u[6]>>4 != 4 || u[8]>>6 != 2 {
			t.Fatalf("%s is not a version-4 variant-1 uuid", u)
		}
		if seen[u] {
			t.Fatalf("duplicate %s", u)
		}
		seen[u] = true
	}
}

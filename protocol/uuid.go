package protocol

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// UUID is a Kafka UUID: topic IDs, directory IDs, incarnation IDs, cluster
// IDs and KIP-848 member IDs. Its text form is Kafka's Uuid.toString:
// URL-safe base64 without padding.
type UUID [16]byte

// String formats u the way Kafka does.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUUID parses Kafka's text form of a UUID.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) != len(u) {
		return u, fmt.Errorf("%q is not a UUID", s)
	}
	copy(u[:], raw)
	return u, nil
}

// RandomUUID returns a random version-4 UUID, avoiding the values Kafka's
// Uuid.randomUuid avoids: those whose high 64 bits are 0 (the zero UUID
// and the reserved metadata topic id among them) and those whose text
// starts with '-' (confusing on a command line).
func RandomUUID() UUID {
	for {
		var u UUID
		if _, err := rand.Read(u[:]); err != nil {
			panic(fmt.Sprintf("reading random bytes: %v", err))
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		if binary.BigEndian.Uint64(u[:8]) == 0 || u.String()[0] == '-' {
			continue
		}
		return u
	}
}

package broker

import (
	"crypto/rand"
	"errors"
	"time"

	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errFromCode turns a Kafka error code into an error (nil for 0).
func errFromCode(code int16) error { return kerr.ErrorForCode(code) }

// codeOf returns the Kafka error code for err: the *kerr.Error it wraps,
// or KAFKA_STORAGE_ERROR for any other failure of the log, or UNKNOWN.
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// newUUID returns a random (version 4) UUID.
func newUUID() controller.UUID {
	var u controller.UUID
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func deadlineNow() time.Time { return time.Now() }

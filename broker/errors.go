package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errFromCode turns a Kafka error code into an error (nil for 0).
func errFromCode(code int16) error { return kerr.ErrorForCode(code) }

// codeOf returns the Kafka error code for err: the code of the *kerr.Error
// it wraps, UNKNOWN_SERVER_ERROR when it wraps none (the caller maps that
// to the error its API answers for an unexpected failure), 0 for nil.
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

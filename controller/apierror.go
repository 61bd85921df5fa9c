package controller

// apiError is how the controller's decisions answer an item of a request:
// an error code with the message Kafka's ApiError carries for it, shared by
// every decision and by the answers to a failed commit (commitError).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// apiError is an error code with Kafka's message.
type apiError struct {
	err *kerr.Error
	msg string
}

func (e *apiError) code() int16 {
	if e == nil {
		return 0
	}
	return e.err.Code
}

// message is the message sent to the client: nil for success; Kafka's
// ApiError sends the code's default message when none is given.
func (e *apiError) message() *string {
	if e == nil {
		return nil
	}
	if e.msg == "" {
		return strPtr(e.err.Description)
	}
	return strPtr(e.msg)
}

func newAPIError(err *kerr.Error, format string, args ...any) *apiError {
	return &apiError{err: err, msg: fmt.Sprintf(format, args...)}
}

// commitError is the per-item error for an operation whose records were
// not committed.
func commitError(err error) *apiError {
	return &apiError{err: kerr.TypedErrorForCode(errorCode(err)), msg: err.Error()}
}

// kafkaMessage is the message ApiError.fromThrowable keeps: none for
// success, for UNKNOWN_SERVER_ERROR, and for a message that is the code's
// default one.
func (e *apiError) kafkaMessage() *string {
	if e == nil || e.err == kerr.UnknownServerError || e.msg == "" || e.msg == e.err.Description {
		return nil
	}
	return strPtr(e.msg)
}

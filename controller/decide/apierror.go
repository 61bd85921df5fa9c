package decide

// Error is how the decisions answer an item of a request: an error code
// with the message Kafka's ApiError carries for it, shared by every
// decision and by the answers the controller gives when a decision's
// records are not committed.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is an error code with Kafka's message. A nil *Error is success.
type Error struct {
	err *kerr.Error
	msg string
}

// NewError is err with the message format makes of args.
func NewError(err *kerr.Error, format string, args ...any) *Error {
	return &Error{err: err, msg: fmt.Sprintf(format, args...)}
}

// Code is the error code: 0 for success.
func (e *Error) Code() int16 {
	if e == nil {
		return 0
	}
	return e.err.Code
}

// Kind is the Kafka error of the code (nil for success).
func (e *Error) Kind() *kerr.Error {
	if e == nil {
		return nil
	}
	return e.err
}

// Reason is the message as given, "" when none is.
func (e *Error) Reason() string {
	if e == nil {
		return ""
	}
	return e.msg
}

// Message is the message sent to the client: nil for success; Kafka's
// ApiError sends the code's default message when none is given.
func (e *Error) Message() *string {
	if e == nil {
		return nil
	}
	if e.msg == "" {
		return strPtr(e.err.Description)
	}
	return strPtr(e.msg)
}

// KafkaMessage is the message ApiError.fromThrowable keeps: none for
// success, for UNKNOWN_SERVER_ERROR, and for a message that is the code's
// default one.
func (e *Error) KafkaMessage() *string {
	if e == nil || e.err == kerr.UnknownServerError || e.msg == "" || e.msg == e.err.Description {
		return nil
	}
	return strPtr(e.msg)
}

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

// kafkaMessages are Kafka's default messages (Errors.message()) where they
// differ from kerr's descriptions or are needed verbatim.
var kafkaMessages = map[int16]string{
	0:                                            "NONE",
	kerr.UnknownServerError.Code:                 "The server experienced an unexpected error when processing the request.",
	kerr.RequestTimedOut.Code:                    "The request timed out.",
	kerr.CoordinatorNotAvailable.Code:            "The coordinator is not available.",
	kerr.InvalidRequest.Code:                     "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
	kerr.TopicAuthorizationFailed.Code:           "Topic authorization failed.",
	kerr.GroupAuthorizationFailed.Code:           "Group authorization failed.",
	kerr.ClusterAuthorizationFailed.Code:         "Cluster authorization failed.",
	kerr.TransactionalIDAuthorizationFailed.Code: "Transactional Id authorization failed.",
	kerr.SecurityDisabled.Code:                   "Security features are disabled.",
	kerr.DelegationTokenAuthorizationFailed.Code: "Delegation Token authorization failed.",
	kerr.PrincipalDeserializationFailure.Code:    "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.",
}

// kafkaMessage is Kafka's default message for an error code.
func kafkaMessage(code int16) string {
	if msg, ok := kafkaMessages[code]; ok {
		return msg
	}
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return ke.Description
	}
	return ""
}

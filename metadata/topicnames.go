package metadata

// Topic names: Kafka's Topic.validate, which the controller's CreateTopics
// and every layer of the broker that checks a topic name apply.

import "fmt"

const maxTopicNameLength = 249

// TopicNameError returns Kafka's message for an illegal topic name
// (Topic.validate), or "" when the name is legal. Every layer that checks
// topic names uses it.
func TopicNameError(name string) string {
	var reason string
	switch {
	case name == "":
		reason = "the empty string is not allowed"
	case name == ".":
		reason = "'.' is not allowed"
	case name == "..":
		reason = "'..' is not allowed"
	case len(name) > maxTopicNameLength:
		reason = fmt.Sprintf("the length of '%s' is longer than the max allowed length %d", name, maxTopicNameLength)
	case !legalTopicChars(name):
		reason = fmt.Sprintf("'%s' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'", name)
	default:
		return ""
	}
	return "Topic name is invalid: " + reason
}

func legalTopicChars(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

package authz

import (
	"fmt"
	"strings"

	"github.com/gregorbroker/gregor/broker/config"
)

// OptionsFromConfig reads authorizer.class.name, super.users and
// allow.everyone.if.no.acl.found: nil options (no authorization) when the
// class is empty, Kafka's StandardAuthorizer's when it is named, and an
// error for any other class.
func OptionsFromConfig(cfg *config.Broker) (*Options, error) {
	switch class := strings.TrimSpace(cfg.String("authorizer.class.name")); class {
	case "":
		return nil, nil
	case StandardAuthorizerClass:
		superUsers, err := ParseSuperUsers(cfg.Raw["super.users"])
		if err != nil {
			return nil, fmt.Errorf("super.users: %w", err)
		}
		return &Options{
			SuperUsers:                superUsers,
			AllowEveryoneIfNoACLFound: strings.EqualFold(strings.TrimSpace(cfg.Raw["allow.everyone.if.no.acl.found"]), "true"),
		}, nil
	default:
		return nil, fmt.Errorf("authorizer.class.name %s: Gregor runs no Java classes; it implements %s only (or no authorizer, when empty)", class, StandardAuthorizerClass)
	}
}

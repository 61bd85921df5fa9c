package main

// SASL for the checks: GOCLIENTS_SASL=MECHANISM:USER:PASSWORD (PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512) makes sarama authenticate. Sarama has no
// SCRAM implementation of its own; xdg-go/scram (already in this module's
// graph through kafka-go's sasl/scram) is the one its documentation uses.

import (
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// saslFromEnv is GOCLIENTS_SASL, split; ok is false when it is unset.
func saslFromEnv() (mechanism, user, password string, ok bool, err error) {
	v := os.Getenv("GOCLIENTS_SASL")
	if v == "" {
		return "", "", "", false, nil
	}
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		return "", "", "", false, fmt.Errorf("GOCLIENTS_SASL=%q: want MECHANISM:USER:PASSWORD", v)
	}
	return parts[0], parts[1], parts[2], true, nil
}

// saramaSASL configures cfg from GOCLIENTS_SASL.
func saramaSASL(cfg *sarama.Config) error {
	mech, user, pass, ok, err := saslFromEnv()
	if err != nil || !ok {
		return err
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.User = user
	cfg.Net.SASL.Password = pass
	switch mech {
	case "PLAIN":
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: scram.SHA256} }
	case "SCRAM-SHA-512":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: scram.SHA512} }
	default:
		return fmt.Errorf("GOCLIENTS_SASL: unknown mechanism %s", mech)
	}
	return nil
}

// scramClient is sarama's SCRAMClient over xdg-go/scram.
type scramClient struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	cl, err := c.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

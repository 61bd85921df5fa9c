package integration

// Scenarios of TLS listeners (issue 12). Each starts its own single node
// (Env.StartNode) of the target's flavor with the listeners it needs, so
// that the same scenario runs against Apache Kafka 4.3.1 and Gregor.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

func tlsScenarios() []Scenario {
	return []Scenario{
		{Name: "tls/ssl-listener", Doc: "a node with an SSL listener (PEM keystore file): kafka-broker-api-versions and kafka-topics over TLS with a PEM truststore", Timeout: 4 * time.Minute, Run: tlsSSLListener},
	}
}

// tlsNode starts a node with one SSL listener called SSL serving a server
// certificate of a fresh PKI, with the given properties on top.
func tlsNode(ctx context.Context, e *Env, listeners []NodeListener, props func(p *PKI, server *KeyPair) map[string]string) (*SingleNode, *PKI, error) {
	pki, err := e.PKI()
	if err != nil {
		return nil, nil, err
	}
	server, err := pki.Server("broker")
	if err != nil {
		return nil, nil, err
	}
	n, err := e.StartNode(ctx, NodeSpec{Listeners: listeners, Properties: props(pki, server)})
	if err != nil {
		return nil, nil, err
	}
	return n, pki, nil
}

func tlsSSLListener(ctx context.Context, e *Env) error {
	n, pki, err := tlsNode(ctx, e, []NodeListener{{Name: "SSL", Protocol: "SSL"}}, func(p *PKI, server *KeyPair) map[string]string {
		return p.ListenerSSL("SSL", server)
	})
	if err != nil {
		return err
	}
	cfg, err := e.ClientProperties("client-ssl.properties", pki.ClientSSL(nil))
	if err != nil {
		return err
	}
	out, err := e.KafkaOn(ctx, n.Addr("SSL"), "", mainAPIVersions, "--command-config", cfg)
	if err != nil {
		return fmt.Errorf("kafka-broker-api-versions over TLS: %w", err)
	}
	if !strings.Contains(out.Stdout, "(id: 1 rack: null") || !strings.Contains(out.Stdout, "ApiVersions(18)") {
		return fmt.Errorf("kafka-broker-api-versions over TLS listed no broker 1 with ApiVersions: %s", truncate(out.Stdout, 300))
	}
	topic := e.Name("tls")
	out, err = e.KafkaOn(ctx, n.Addr("SSL"), "", mainTopics, "--command-config", cfg, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
	if err != nil {
		return fmt.Errorf("kafka-topics --create over TLS: %w", err)
	}
	if !strings.Contains(out.Stdout, "Created topic "+topic+".") {
		return fmt.Errorf("kafka-topics --create over TLS printed no confirmation: %s", out.Tail())
	}
	out, err = e.KafkaOn(ctx, n.Addr("SSL"), "", mainTopics, "--command-config", cfg, "--list")
	if err != nil {
		return fmt.Errorf("kafka-topics --list over TLS: %w", err)
	}
	if !strings.Contains(" "+strings.Join(strings.Fields(out.Stdout), " ")+" ", " "+topic+" ") {
		return fmt.Errorf("kafka-topics --list over TLS does not list %s: %s", topic, truncate(out.Stdout, 300))
	}
	// The same client without the CA does not trust the broker.
	untrusting, err := e.ClientProperties("client-untrusting.properties", map[string]string{"security.protocol": "SSL"})
	if err != nil {
		return err
	}
	out, err = e.KafkaOn(ctx, n.Addr("SSL"), "", mainTopics, "--command-config", untrusting, "--list")
	if err == nil {
		return fmt.Errorf("kafka-topics over TLS without the CA in its truststore succeeded: %s", truncate(out.Stdout, 300))
	}
	if !strings.Contains(out.Stderr, "SSL handshake failed") {
		return fmt.Errorf("kafka-topics over TLS without the CA in its truststore failed, but not in the handshake: %s", out.Tail())
	}
	return nil
}

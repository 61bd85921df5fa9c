package integration

// Scenarios of SASL authentication. Each starts its own single
// node (Env.StartNode) of the target's flavor with a SASL_PLAINTEXT
// listener, SCRAM users created with `storage format --add-scram` (as
// kafka-storage does), and the stock tools and clients authenticating to
// it, so that the same scenario runs against Apache Kafka 4.3.1 and
// Gregor.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func saslScenarios() []Scenario {
	return []Scenario{
		{Name: "sasl/scram-cli", Doc: "SASL_PLAINTEXT with SCRAM-SHA-256/512: kafka-configs creates and deletes a user's credentials (--add-config, --delete-config) as an admin from --add-scram; kafka-topics, console producer and consumer as that user; wrong passwords refused with Kafka's message", OwnNodes: true, Timeout: 5 * time.Minute, Run: saslScramCLI},
		{Name: "sasl/plain-cli", Doc: "SASL_PLAINTEXT with PLAIN users from the JAAS config: kafka-broker-api-versions and kafka-topics authenticate; a wrong password and an unknown mechanism are refused", OwnNodes: true, Timeout: 4 * time.Minute, Run: saslPlainCLI},
		{Name: "sasl/reauthentication", Doc: "connections.max.reauth.ms=10000 on a SCRAM listener: the Java producer (perf test, 30 s) re-authenticates at least twice on its connection (KIP-368) and it and the console consumer on their connections (KIP-368) and finish without error", OwnNodes: true, Timeout: 4 * time.Minute, Run: saslReauthentication},
		{Name: "sasl/oauthbearer-unsecured", Doc: "OAUTHBEARER with Kafka's default (unsecured) validator and a required scope: Java clients with unsecured tokens list topics; a token without the scope is refused with insufficient_scope", OwnNodes: true, Timeout: 4 * time.Minute, Run: saslOAuthUnsecured},
		{Name: "sasl/ssl-scram-console", Doc: "SASL_SSL (TLS with a PEM certificate) with SCRAM-SHA-512: the Java console producer and consumer as a user created with kafka-configs; without the CA in its truststore the client fails in the TLS handshake, with a wrong password in SASL", OwnNodes: true, Timeout: 5 * time.Minute, Run: saslSSLScramConsole},
		{Name: "client/kcat-sasl-ssl", Doc: "kcat over SASL_SSL with PLAIN (the system's librdkafka) and SCRAM-SHA-256 (librdkafka 2.x from the confluent-kafka wheel): metadata, produce, read back, group consume; wrong passwords refused; librdkafka 2.0.2's SCRAM (a repeated client nonce) refused as Kafka 4 refuses it", OwnNodes: true, Timeout: 5 * time.Minute, Run: saslKcat},
		{Name: "client/confluent-kafka-python-sasl-ssl", Doc: "confluent-kafka (librdkafka) over SASL_SSL: the client check (admin, idempotent produce, group consume + commit, groups) with SCRAM-SHA-512 and again with PLAIN", OwnNodes: true, Timeout: 6 * time.Minute, Run: saslConfluentPython},
		{Name: "client/kafkajs-scram", Doc: "kafkajs over SASL_PLAINTEXT with SCRAM-SHA-256: admin create, idempotent produce, group consume + commit, list/describe groups, fetch offsets", OwnNodes: true, Timeout: 5 * time.Minute, Run: func(ctx context.Context, e *Env) error {
			return saslClientCheck(ctx, e, "kafkajs", "SCRAM-SHA-256")
		}},
		{Name: "client/sarama-scram", Doc: "sarama over SASL_PLAINTEXT with SCRAM-SHA-512 (xdg-go/scram): cluster admin, idempotent lz4 produce, consumer group, admin offsets/describe", OwnNodes: true, Timeout: 5 * time.Minute, Run: func(ctx context.Context, e *Env) error {
			return saslClientCheck(ctx, e, "sarama", "SCRAM-SHA-512")
		}},
	}
}

// SCRAM users every SASL node has from its format.
const (
	saslAdmin         = "admin"
	saslAdminPassword = "admin-secret"
	saslUser          = "alice"
	saslUserPassword  = "alice-secret"
)

// saslNode starts a node with a SASL_PLAINTEXT listener called SASL
// enabling mechs, PLAIN users admin and alice in its JAAS entry, SCRAM
// credentials for admin (both SCRAM mechanisms) from --add-scram, and
// props on top.
func saslNode(ctx context.Context, e *Env, mechs []string, props map[string]string) (*SingleNode, error) {
	n, _, err := saslNodeOver(ctx, e, "SASL_PLAINTEXT", mechs, props)
	return n, err
}

// saslNodeOver is saslNode with the listener's protocol: SASL_SSL adds a
// server certificate of a fresh PKI, which it returns.
func saslNodeOver(ctx context.Context, e *Env, protocol string, mechs []string, props map[string]string) (*SingleNode, *PKI, error) {
	p := map[string]string{"listener.name.sasl.sasl.enabled.mechanisms": strings.Join(mechs, ",")}
	for _, m := range mechs {
		key := "listener.name.sasl." + strings.ToLower(m) + ".sasl.jaas.config"
		switch {
		case m == "PLAIN":
			p[key] = fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s" user_%s="%s";`,
				saslAdmin, saslAdminPassword, saslAdmin, saslAdminPassword, saslUser, saslUserPassword)
		case strings.HasPrefix(m, "SCRAM-"):
			p[key] = fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, saslAdmin, saslAdminPassword)
		case m == "OAUTHBEARER":
			// The broker's own login needs a principal claim too.
			p[key] = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka";`
		}
	}
	var pki *PKI
	if protocol == "SASL_SSL" {
		var err error
		if pki, err = e.PKI(); err != nil {
			return nil, nil, err
		}
		server, err := pki.Server("broker")
		if err != nil {
			return nil, nil, err
		}
		for k, v := range pki.ListenerSSL("SASL", server) {
			p[k] = v
		}
	}
	for k, v := range props {
		p[k] = v
	}
	var flags []string
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		flags = append(flags, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, saslAdmin, saslAdminPassword))
	}
	n, err := e.StartNode(ctx, NodeSpec{Listeners: []NodeListener{{Name: "SASL", Protocol: protocol}}, Properties: p, FormatFlags: flags})
	return n, pki, err
}

// saslNodeWithUser starts a node as saslNodeOver does and gives alice a
// credential of scram (a SCRAM mechanism the listener enables) with
// kafka-configs, as the --add-scram admin; it returns the listener's
// address and the PKI (nil over SASL_PLAINTEXT).
func saslNodeWithUser(ctx context.Context, e *Env, protocol string, mechs []string, scram string) (string, *PKI, error) {
	n, pki, err := saslNodeOver(ctx, e, protocol, mechs, nil)
	if err != nil {
		return "", nil, err
	}
	addr := n.Addr("SASL")
	admin, err := e.ClientProperties("admin.properties", saslClientProps(pki, scram, saslAdmin, saslAdminPassword))
	if err != nil {
		return "", nil, err
	}
	out, err := e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", saslUser,
		"--add-config", scram+"=[password="+saslUserPassword+"]")
	if err != nil || !strings.Contains(out.Stdout, "Completed updating config for user "+saslUser+".") {
		return "", nil, fmt.Errorf("kafka-configs --add-config %s for %s: %v: %s", scram, saslUser, err, out.Tail())
	}
	return addr, pki, nil
}

// saslClientConfig writes a Java client's properties authenticating with
// mechanism as user.
func saslClientConfig(e *Env, name, mechanism, user, password string) (string, error) {
	return e.ClientProperties(name, saslClientProps(nil, mechanism, user, password))
}

// saslClientProps are a Java client's properties authenticating with
// mechanism as user, over TLS trusting pki's CA when pki is not nil.
func saslClientProps(pki *PKI, mechanism, user, password string) map[string]string {
	module := "org.apache.kafka.common.security.scram.ScramLoginModule"
	if mechanism == "PLAIN" {
		module = "org.apache.kafka.common.security.plain.PlainLoginModule"
	}
	props := map[string]string{
		"security.protocol": "SASL_PLAINTEXT",
		"sasl.mechanism":    mechanism,
		"sasl.jaas.config":  fmt.Sprintf(`%s required username="%s" password="%s";`, module, user, password),
	}
	if pki != nil {
		for k, v := range pki.ClientSSL(nil) {
			props[k] = v
		}
		props["security.protocol"] = "SASL_SSL"
	}
	return props
}

// librdkafkaSASL are the -X settings of a librdkafka client (kcat,
// confluent-kafka) authenticating with mechanism as user over SASL_SSL
// trusting pki's CA.
func librdkafkaSASL(pki *PKI, mechanism, user, password string) map[string]string {
	return map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
		"ssl.ca.location": pki.CAFile,
	}
}

// invalidCredentials is what Kafka tells a SCRAM client with the wrong
// password or no such user.
func invalidCredentials(mechanism string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
}

func saslScramCLI(ctx context.Context, e *Env) error {
	n, err := saslNode(ctx, e, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, nil)
	if err != nil {
		return err
	}
	addr := n.Addr("SASL")
	admin, err := saslClientConfig(e, "admin.properties", "SCRAM-SHA-512", saslAdmin, saslAdminPassword)
	if err != nil {
		return err
	}
	// Both mechanisms at once: Kafka's controller alters one credential
	// of a user per request (DUPLICATE_RESOURCE), and so does Gregor's.
	both := fmt.Sprintf("SCRAM-SHA-256=[iterations=8192,password=%s],SCRAM-SHA-512=[password=%s]", saslUserPassword, saslUserPassword)
	out, err := e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", saslUser, "--add-config", both)
	if err == nil || !strings.Contains(out.Stderr, "DuplicateResourceException: A user credential cannot be altered twice in the same request") {
		return fmt.Errorf("kafka-configs --add-config of two mechanisms at once: %v: %s", err, out.Tail())
	}
	for _, cfg := range []string{"SCRAM-SHA-256=[iterations=8192,password=" + saslUserPassword + "]", "SCRAM-SHA-512=[password=" + saslUserPassword + "]"} {
		out, err := e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", saslUser, "--add-config", cfg)
		if err != nil {
			return fmt.Errorf("kafka-configs --add-config %s as the --add-scram admin: %w", cfg, err)
		}
		if !strings.Contains(out.Stdout, "Completed updating config for user "+saslUser+".") {
			return fmt.Errorf("kafka-configs --add-config printed no confirmation: %s", out.Tail())
		}
	}
	if err := describeScram(ctx, e, addr, admin, "SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096"); err != nil {
		return err
	}
	alice256, err := saslClientConfig(e, "alice-256.properties", "SCRAM-SHA-256", saslUser, saslUserPassword)
	if err != nil {
		return err
	}
	alice512, err := saslClientConfig(e, "alice-512.properties", "SCRAM-SHA-512", saslUser, saslUserPassword)
	if err != nil {
		return err
	}
	topic := e.Name("scram")
	if err := consoleRoundTripAs(ctx, e, addr, topic, alice256, alice256, alice512); err != nil {
		return fmt.Errorf("as alice (SCRAM-SHA-256, then SCRAM-SHA-512): %w", err)
	}
	// Wrong password: Kafka's generic message, nothing about the user.
	wrong, err := saslClientConfig(e, "alice-wrong.properties", "SCRAM-SHA-256", saslUser, "not-her-password")
	if err != nil {
		return err
	}
	if err := expectAuthFailure(ctx, e, addr, wrong, invalidCredentials("SCRAM-SHA-256")); err != nil {
		return fmt.Errorf("wrong SCRAM password: %w", err)
	}
	// Deleting alice's SCRAM-SHA-512 credential stops those logins only.
	out, err = e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", saslUser,
		"--delete-config", "SCRAM-SHA-512")
	if err != nil || !strings.Contains(out.Stdout, "Completed updating config for user "+saslUser+".") {
		return fmt.Errorf("kafka-configs --delete-config SCRAM-SHA-512: %v: %s", err, out.Tail())
	}
	if err := expectAuthFailure(ctx, e, addr, alice512, invalidCredentials("SCRAM-SHA-512")); err != nil {
		return fmt.Errorf("SCRAM-SHA-512 after its credential was deleted: %w", err)
	}
	if err := describeScram(ctx, e, addr, admin, "SCRAM-SHA-256=iterations=8192"); err != nil {
		return err
	}
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", alice256, "--list"); err != nil || !strings.Contains(out.Stdout, topic) {
		return fmt.Errorf("kafka-topics --list as alice (SCRAM-SHA-256) after the SHA-512 deletion: %v: %s", err, out.Tail())
	}
	// Deleting a credential that does not exist is Kafka's error.
	out, err = e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", "nobody",
		"--delete-config", "SCRAM-SHA-256")
	if err == nil || !strings.Contains(out.Stderr+out.Stdout, "Attempt to delete a user credential that does not exist") {
		return fmt.Errorf("kafka-configs --delete-config for a user without credentials: %v: %s", err, out.Tail())
	}
	return nil
}

// describeScram runs kafka-configs --describe for alice's SCRAM
// credentials and requires exactly the mechanisms want (as the tool
// prints them: MECHANISM=iterations=N).
func describeScram(ctx context.Context, e *Env, addr, admin string, want ...string) error {
	out, err := e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--describe", "--entity-type", "users", "--entity-name", saslUser)
	if err != nil {
		return fmt.Errorf("kafka-configs --describe --entity-type users: %w: %s", err, out.Tail())
	}
	prefix := "SCRAM credential configs for user-principal '" + saslUser + "' are "
	line := grepLines(out.Stdout, prefix)
	if line == "" {
		return fmt.Errorf("kafka-configs --describe printed no SCRAM line: %s", truncate(out.Stdout, 300))
	}
	got := strings.Split(strings.TrimPrefix(strings.TrimSpace(line), prefix), ", ")
	if err := sameSet(got, want); err != nil {
		return fmt.Errorf("kafka-configs --describe: %q: %w", line, err)
	}
	return nil
}

// expectAuthFailure runs kafka-topics --list with config and requires it
// to fail with want in its output.
func expectAuthFailure(ctx context.Context, e *Env, addr, config, want string) error {
	out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", config, "--list")
	if err == nil {
		return fmt.Errorf("kafka-topics --list succeeded: %s", truncate(out.Stdout, 200))
	}
	if !strings.Contains(out.Stderr+out.Stdout, want) {
		return fmt.Errorf("kafka-topics --list failed without %q: %s", want, out.Tail())
	}
	return nil
}

func saslPlainCLI(ctx context.Context, e *Env) error {
	n, err := saslNode(ctx, e, []string{"PLAIN"}, nil)
	if err != nil {
		return err
	}
	addr := n.Addr("SASL")
	alice, err := saslClientConfig(e, "alice.properties", "PLAIN", saslUser, saslUserPassword)
	if err != nil {
		return err
	}
	out, err := e.KafkaOn(ctx, addr, "", mainAPIVersions, "--command-config", alice)
	if err != nil {
		return fmt.Errorf("kafka-broker-api-versions as alice (PLAIN): %w", err)
	}
	for _, want := range []string{"(id: 1 rack: null", "SaslHandshake(17): 0 to 1", "SaslAuthenticate(36): 0 to 2"} {
		if !strings.Contains(out.Stdout, want) {
			return fmt.Errorf("kafka-broker-api-versions over SASL lacks %q: %s", want, truncate(out.Stdout, 400))
		}
	}
	topic := e.Name("plain")
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", alice, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"); err != nil || !strings.Contains(out.Stdout, "Created topic "+topic+".") {
		return fmt.Errorf("kafka-topics --create as alice (PLAIN): %v: %s", err, out.Tail())
	}
	wrong, err := saslClientConfig(e, "alice-wrong.properties", "PLAIN", saslUser, "nope")
	if err != nil {
		return err
	}
	if err := expectAuthFailure(ctx, e, addr, wrong, "Authentication failed: Invalid username or password"); err != nil {
		return fmt.Errorf("wrong PLAIN password: %w", err)
	}
	scram, err := saslClientConfig(e, "alice-scram.properties", "SCRAM-SHA-256", saslUser, saslUserPassword)
	if err != nil {
		return err
	}
	if err := expectAuthFailure(ctx, e, addr, scram, "Client SASL mechanism 'SCRAM-SHA-256' not enabled in the server, enabled mechanisms are [PLAIN]"); err != nil {
		return fmt.Errorf("a mechanism the listener does not enable: %w", err)
	}
	return nil
}

func saslReauthentication(ctx context.Context, e *Env) error {
	n, err := saslNode(ctx, e, []string{"SCRAM-SHA-256"}, map[string]string{"listener.name.sasl.connections.max.reauth.ms": "10000"})
	if err != nil {
		return err
	}
	addr := n.Addr("SASL")
	admin, err := saslClientConfig(e, "admin.properties", "SCRAM-SHA-256", saslAdmin, saslAdminPassword)
	if err != nil {
		return err
	}
	topic := e.Name("reauth")
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", admin, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"); err != nil {
		return fmt.Errorf("kafka-topics --create: %w: %s", err, out.Tail())
	}
	// 600 records at 20 a second: the producer's connection outlives
	// its 10 s session three times and must re-authenticate. The client
	// starts a re-authentication at a random point between 85% and 95%
	// of the session and must be heard before the session ends, or the
	// broker closes the connection (as Kafka does) and the client
	// reconnects instead: 3 s sessions (0.15-0.45 s of margin) were
	// missed by a JVM starved on a loaded 2-core machine.
	out, err := e.KafkaOn(ctx, addr, "", mainPerfProducer, "--topic", topic, "--num-records", "600", "--record-size", "100",
		"--throughput", "20", "--command-config", admin, "--command-property", "acks=all", "--print-metrics")
	if err != nil {
		return fmt.Errorf("producer perf test across re-authentications: %w: %s", err, out.Tail())
	}
	if !strings.Contains(out.Stdout, "600 records sent") {
		return fmt.Errorf("producer perf test did not send 600 records: %s", out.Tail())
	}
	// The producer's own count of re-authentications (its Selector's
	// successful-reauthentication-total): it re-authenticated rather
	// than reconnecting after the server closed an expired session.
	reauths := 0.0
	for _, l := range strings.Split(out.Stdout, "\n") {
		if strings.Contains(l, "producer-metrics:successful-reauthentication-total:") {
			f := strings.Fields(l)
			if v, err := strconv.ParseFloat(strings.TrimSuffix(f[len(f)-1], ","), 64); err == nil {
				reauths = v
			}
		}
	}
	if reauths < 2 {
		return fmt.Errorf("the producer re-authenticated %v times in 30 s of 10 s sessions: %s\n%s", reauths, truncate(grepLines(out.Stdout, "reauthentication"), 600),
			truncate(grepLines(out.Stdout, "producer-metrics:connection-c"), 600))
	}
	out, err = e.KafkaOn(ctx, addr, "", mainConsumer, "--command-config", admin, "--topic", topic, "--from-beginning",
		"--max-messages", "600", "--timeout-ms", "30000")
	if err != nil {
		return fmt.Errorf("console consumer: %w: %s", err, out.Tail())
	}
	if got := len(nonEmptyLines(out.Stdout)); got != 600 {
		return fmt.Errorf("console consumer read %d records, want 600", got)
	}
	return nil
}

func saslOAuthUnsecured(ctx context.Context, e *Env) error {
	n, err := saslNode(ctx, e, []string{"OAUTHBEARER"}, nil)
	if err != nil {
		return err
	}
	addr := n.Addr("SASL")
	client := func(name, scope string) (string, error) {
		jaas := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice"`
		if scope != "" {
			jaas += ` unsecuredLoginListClaim_scope="` + scope + `"`
		}
		return e.ClientProperties(name, map[string]string{
			"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas + ";",
		})
	}
	good, err := client("oauth-good.properties", ",kafka,other")
	if err != nil {
		return err
	}
	topic := e.Name("oauth")
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", good, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"); err != nil || !strings.Contains(out.Stdout, "Created topic "+topic+".") {
		return fmt.Errorf("kafka-topics --create with an unsecured token with the scope: %v: %s", err, out.Tail())
	}
	noScope, err := client("oauth-noscope.properties", ",other")
	if err != nil {
		return err
	}
	if err := expectAuthFailure(ctx, e, addr, noScope, `insufficient_scope`); err != nil {
		return fmt.Errorf("a token without the required scope: %w", err)
	}
	return nil
}

// saslClientCheck runs a client library's produce/consume/group/admin
// check over a SCRAM listener, authenticating as alice with mechanism.
func saslClientCheck(ctx context.Context, e *Env, client, mechanism string) error {
	addr, _, err := saslNodeWithUser(ctx, e, "SASL_PLAINTEXT", []string{mechanism}, mechanism)
	if err != nil {
		return err
	}
	topic, group := e.Name(client+"-scram"), e.Name(client+"-scram-group")
	cred := mechanism + ":" + saslUser + ":" + saslUserPassword
	var c Cmd
	switch client {
	case "kafkajs":
		mods, err := e.Tools.NodeModules(ctx)
		if err != nil {
			return err
		}
		c = Cmd{Name: "node", Args: []string{filepath.Join(e.Tools.Root, "integration", "clients", "node", "kafkajs_check.js"), addr, topic, group, strconv.Itoa(clientRecords)},
			Env: []string{"NODE_PATH=" + mods, "KAFKAJS_SASL=" + cred}}
	case "sarama":
		bin, err := e.Tools.GoClients(ctx)
		if err != nil {
			return err
		}
		c = Cmd{Name: bin, Args: []string{"sarama", addr, topic, group, strconv.Itoa(clientRecords)}, Env: []string{"GOCLIENTS_SASL=" + cred}}
	default:
		return fmt.Errorf("no SASL check for %s", client)
	}
	c.Timeout = 3 * time.Minute
	out, err := e.Exec(ctx, c)
	if err != nil {
		return err
	}
	if err := checkClientReport(out.Stdout); err != nil {
		return err
	}
	// The same client with a wrong password fails.
	for i, a := range c.Env {
		if strings.HasPrefix(a, "KAFKAJS_SASL=") || strings.HasPrefix(a, "GOCLIENTS_SASL=") {
			c.Env[i] = a[:strings.IndexByte(a, '=')+1] + mechanism + ":" + saslUser + ":wrong"
		}
	}
	c.Args[len(c.Args)-3] = topic + "-wrong"
	c.Timeout = time.Minute
	out, err = e.Exec(ctx, c)
	if err == nil {
		return fmt.Errorf("%s with a wrong password succeeded: %s", client, truncate(out.Stdout, 200))
	}
	if !strings.Contains(out.Stdout+out.Stderr, invalidCredentials(mechanism)) {
		return fmt.Errorf("%s with a wrong password failed without Kafka's message: %s", client, out.Tail())
	}
	return nil
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func saslSSLScramConsole(ctx context.Context, e *Env) error {
	addr, pki, err := saslNodeWithUser(ctx, e, "SASL_SSL", []string{"SCRAM-SHA-512"}, "SCRAM-SHA-512")
	if err != nil {
		return err
	}
	alice, err := e.ClientProperties("alice.properties", saslClientProps(pki, "SCRAM-SHA-512", saslUser, saslUserPassword))
	if err != nil {
		return err
	}
	topic := e.Name("ssl-scram")
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", alice, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1"); err != nil || !strings.Contains(out.Stdout, "Created topic "+topic+".") {
		return fmt.Errorf("kafka-topics --create over SASL_SSL: %v: %s", err, out.Tail())
	}
	lines := keyedLines("t", 30)
	if out, err := e.KafkaOn(ctx, addr, strings.Join(lines, "\n")+"\n", mainProducer, "--command-config", alice, "--topic", topic,
		"--property", "parse.key=true", "--property", "key.separator=:"); err != nil {
		return fmt.Errorf("console producer over SASL_SSL: %w: %s", err, out.Tail())
	}
	out, err := e.KafkaOn(ctx, addr, "", mainConsumer, "--command-config", alice, "--topic", topic, "--group", e.Name("ssl-scram-group"), "--from-beginning",
		"--max-messages", strconv.Itoa(len(lines)), "--timeout-ms", "30000", "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:")
	if err != nil {
		return fmt.Errorf("console consumer over SASL_SSL: %w: %s", err, out.Tail())
	}
	if err := sameSet(nonEmptyLines(out.Stdout), lines); err != nil {
		return fmt.Errorf("console consumer over SASL_SSL read other records: %w", err)
	}
	// TLS comes first: a client that does not trust the CA fails there.
	untrusting := saslClientProps(pki, "SCRAM-SHA-512", saslUser, saslUserPassword)
	delete(untrusting, "ssl.truststore.type")
	delete(untrusting, "ssl.truststore.location")
	cfg, err := e.ClientProperties("alice-untrusting.properties", untrusting)
	if err != nil {
		return err
	}
	if err := expectAuthFailure(ctx, e, addr, cfg, "SSL handshake failed"); err != nil {
		return fmt.Errorf("SASL_SSL without the CA: %w", err)
	}
	wrong, err := e.ClientProperties("alice-wrong.properties", saslClientProps(pki, "SCRAM-SHA-512", saslUser, "wrong"))
	if err != nil {
		return err
	}
	if err := expectAuthFailure(ctx, e, addr, wrong, invalidCredentials("SCRAM-SHA-512")); err != nil {
		return fmt.Errorf("SASL_SSL with a wrong password: %w", err)
	}
	return nil
}

// kcatArgs are -X arguments for settings.
func kcatArgs(settings map[string]string) []string {
	var args []string
	for k, v := range settings {
		args = append(args, "-X", k+"="+v)
	}
	return args
}

// modernLibrdkafka is the environment that has kcat load the librdkafka
// the pinned confluent-kafka wheel ships (2.x, SSL built in) instead of
// the system's: Debian's kcat links librdkafka 2.0.2, whose SCRAM repeats
// its own nonce in the final message (fixed in 2.6.1,
// confluentinc/librdkafka#4895), which Kafka 4 refuses.
func modernLibrdkafka(ctx context.Context, e *Env) ([]string, error) {
	if _, err := e.Tools.Python(ctx); err != nil {
		return nil, err
	}
	libs, err := filepath.Glob(filepath.Join(e.Tools.Cache, "venv", "lib", "python3*", "site-packages", "confluent_kafka.libs", "librdkafka-*.so*"))
	if err != nil || len(libs) == 0 {
		return nil, fmt.Errorf("no librdkafka in the confluent-kafka wheel (%v)", err)
	}
	dir := filepath.Join(e.Dir, "librdkafka")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	link := filepath.Join(dir, "librdkafka.so.1")
	_ = os.Remove(link)
	if err := os.Symlink(libs[0], link); err != nil {
		return nil, err
	}
	return []string{"LD_LIBRARY_PATH=" + dir + string(filepath.ListSeparator) + filepath.Dir(libs[0])}, nil
}

func saslKcat(ctx context.Context, e *Env) error {
	kcat, err := e.Tools.Kcat(ctx)
	if err != nil {
		return err
	}
	modern, err := modernLibrdkafka(ctx, e)
	if err != nil {
		return err
	}
	addr, pki, err := saslNodeWithUser(ctx, e, "SASL_SSL", []string{"PLAIN", "SCRAM-SHA-256"}, "SCRAM-SHA-256")
	if err != nil {
		return err
	}
	// PLAIN with the system's kcat as it is; SCRAM with a librdkafka of
	// this decade (see modernLibrdkafka).
	for _, run := range []struct {
		mech string
		env  []string
	}{{"PLAIN", nil}, {"SCRAM-SHA-256", modern}} {
		mech := run.mech
		kc := func(timeout time.Duration, stdin string, args ...string) (Output, error) {
			return e.Exec(ctx, Cmd{Name: kcat, Args: append(args, kcatArgs(librdkafkaSASL(pki, mech, saslUser, saslUserPassword))...), Env: run.env, Stdin: stdin, Timeout: timeout})
		}
		topic, group := e.Name("kcat-"+strings.ToLower(mech)), e.Name("kcat-"+strings.ToLower(mech)+"-group")
		out, err := kc(30*time.Second, "", "-b", addr, "-L", "-J")
		if err != nil || !strings.Contains(out.Stdout, `"brokers"`) {
			return fmt.Errorf("kcat -L over SASL_SSL with %s: %v: %s", mech, err, out.Tail())
		}
		lines := keyedLines("k", clientRecords)
		if out, err := kc(time.Minute, strings.Join(lines, "\n")+"\n", "-b", addr, "-t", topic, "-P", "-K:", "-X", "enable.idempotence=true"); err != nil {
			return fmt.Errorf("kcat produce over SASL_SSL with %s: %w: %s", mech, err, out.Tail())
		}
		out, err = kc(time.Minute, "", "-b", addr, "-t", topic, "-C", "-e", "-o", "beginning", "-q", "-f", "%k:%s\n")
		if err != nil {
			return fmt.Errorf("kcat consume over SASL_SSL with %s: %w: %s", mech, err, out.Tail())
		}
		if err := sameSet(nonEmptyLines(out.Stdout), lines); err != nil {
			return fmt.Errorf("kcat -C over SASL_SSL with %s read back: %w", mech, err)
		}
		out, err = kc(90*time.Second, "", "-b", addr, "-G", group, "-X", "auto.offset.reset=earliest", "-c", strconv.Itoa(clientRecords), "-q", "-f", "%k:%s\n", topic)
		if err != nil {
			return fmt.Errorf("kcat -G over SASL_SSL with %s: %w: %s", mech, err, out.Tail())
		}
		if err := sameSet(nonEmptyLines(out.Stdout), lines); err != nil {
			return fmt.Errorf("kcat -G over SASL_SSL with %s: %w", mech, err)
		}
		out, err = e.Exec(ctx, Cmd{Name: kcat, Args: append([]string{"-b", addr, "-L", "-m", "10"}, kcatArgs(librdkafkaSASL(pki, mech, saslUser, "wrong"))...), Env: run.env, Timeout: 30 * time.Second})
		if err == nil || !strings.Contains(out.Stderr+out.Stdout, "Authentication failed") {
			return fmt.Errorf("kcat over SASL_SSL with %s and a wrong password: %v: %s", mech, err, out.Tail())
		}
	}
	// The system's librdkafka 2.0.2 fails SCRAM with the right password:
	// the broker compares the whole nonce, as Kafka 4 does.
	out, err := e.Exec(ctx, Cmd{Name: kcat, Args: append([]string{"-b", addr, "-L", "-m", "10"}, kcatArgs(librdkafkaSASL(pki, "SCRAM-SHA-256", saslUser, saslUserPassword))...), Timeout: 30 * time.Second})
	if err == nil || !strings.Contains(out.Stderr+out.Stdout, invalidCredentials("SCRAM-SHA-256")) {
		return fmt.Errorf("kcat with librdkafka 2.0.2 (a repeated client nonce) over SCRAM: %v: %s", err, out.Tail())
	}
	return nil
}

func saslConfluentPython(ctx context.Context, e *Env) error {
	py, err := e.Tools.Python(ctx)
	if err != nil {
		return err
	}
	addr, pki, err := saslNodeWithUser(ctx, e, "SASL_SSL", []string{"PLAIN", "SCRAM-SHA-512"}, "SCRAM-SHA-512")
	if err != nil {
		return err
	}
	for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
		extra, err := json.Marshal(librdkafkaSASL(pki, mech, saslUser, saslUserPassword))
		if err != nil {
			return err
		}
		topic, group := e.Name("confluent-"+strings.ToLower(mech)), e.Name("confluent-"+strings.ToLower(mech)+"-group")
		out, err := e.Exec(ctx, Cmd{Name: py, Args: []string{filepath.Join(e.Tools.Root, "integration", "clients", "python", "confluent_check.py"),
			addr, topic, group, strconv.Itoa(clientRecords)}, Env: []string{"CONFLUENT_EXTRA_CONFIG=" + string(extra)}, Timeout: 3 * time.Minute})
		if err != nil {
			return fmt.Errorf("confluent-kafka over SASL_SSL with %s: %w", mech, err)
		}
		if err := checkClientReport(out.Stdout); err != nil {
			return fmt.Errorf("confluent-kafka over SASL_SSL with %s: %w", mech, err)
		}
	}
	return nil
}
